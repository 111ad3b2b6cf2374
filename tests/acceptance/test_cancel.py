"""``labq job cancel --reason``: the reason stays with the job, and a stopped task says so."""

from __future__ import annotations

import json
import time

from tests.acceptance.conftest import cli, wait_for

RUNNING = """
whiteboard: cancelled while it runs
recipe_sets:
  - recipes:
      - tasks:
          - {name: nap, run: 'echo started; sleep 120', timeout: 300}
          - {name: after, run: 'true', timeout: 30}
"""
NEVER = """
whiteboard: cancelled while it waits
recipe_sets:
  - recipes:
      - host: {arch: s390x}
        tasks:
          - {name: nap, run: 'true', timeout: 30}
"""


def test_a_cancel_reason_is_kept_and_the_stopped_task_is_warn_cancelled(server, tmp_path):
    client, _, env = server
    assert cli(env, "lab", "add", "lab1").returncode == 0
    assert cli(env, "system", "add", "a.lab1", "--lab", "lab1").returncode == 0
    assert cli(env, "system", "add", "z.lab1", "--lab", "lab1", "--arch", "s390x").returncode == 0
    assert cli(env, "system", "condition", "z.lab1", "manual", "--reason", "kept").returncode == 0
    running, waiting = (
        _submit(env, tmp_path, name, text) for name, text in (("r", RUNNING), ("w", NEVER))
    )
    _wait_running(client, running)
    for job_id in (running, waiting):
        cancelled = cli(env, "job", "cancel", str(job_id), "--reason", "wrong kernel", "--json")
        assert cancelled.returncode == 0, cancelled.stderr
        assert json.loads(cancelled.stdout)["cancelled"] == 1
    for job_id in (running, waiting):
        assert wait_for(client, job_id, timeout=60)["state"] == "cancelled"
        shown = json.loads(cli(env, "job", "show", str(job_id), "--json").stdout)
        assert [s["stop_reason"] for s in shown["sets"]] == ["wrong kernel"]
        assert "wrong kernel" in cli(env, "job", "show", str(job_id)).stdout
        results = json.loads(cli(env, "job", "results", str(job_id), "--json").stdout)
        assert [s["stop_reason"] for s in results["sets"]] == ["wrong kernel"]
        assert "wrong kernel" in cli(env, "job", "results", str(job_id)).stdout
    (recipe,) = json.loads(cli(env, "job", "results", str(running), "--json").stdout)["sets"][0][
        "recipes"
    ]
    nap, after = recipe["tasks"]
    assert (nap["status"], nap["result"], nap["message"]) == ("cancelled", "warn", "cancelled")
    assert (after["status"], after["result"]) == ("cancelled", None)
    assert after["message"] == "never ran: its recipe was cancelled"
    # the system went back to the pool only after the supervisor had stopped the task
    history = client.get(f"/jobs/{running}/history").json()["recipes"][0]["history"]
    assert [h["state"] for h in history][-2:] == ["running", "cancelled"]
    assert history[-1]["reason"] == "wrong kernel"


def _submit(env, tmp_path, name, text) -> int:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    submitted = cli(env, "job", "submit", str(path), "--json")
    assert submitted.returncode == 0, submitted.stderr
    return int(json.loads(submitted.stdout)["id"])


def _wait_running(client, job_id) -> None:
    deadline = time.monotonic() + 30
    while True:
        tasks = client.get(f"/jobs/{job_id}/results").json()["sets"][0]["recipes"][0]["tasks"]
        if tasks[0]["status"] == "running":
            return
        assert time.monotonic() < deadline, tasks
        time.sleep(0.2)
