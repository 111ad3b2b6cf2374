"""``labq system set/remove/summary`` against a real server: a forced removal aborts the
running recipe, whose set is retried on another system; the history keeps it all."""

from __future__ import annotations

import json
import time

from tests.acceptance.conftest import cli, wait_for

LONG = """
whiteboard: outlives its system
recipe_sets:
  - max_retries: 1
    recipes:
      - tasks:
          - {name: nap, run: 'echo on $LABQ_FQDN; sleep 300', timeout: 600}
"""


def _ok(env, *args):
    done = cli(env, *args, "--json")
    assert done.returncode == 0, (args, done.stderr)
    return json.loads(done.stdout)


def _running_on(client, job_id, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        recipe = client.get(f"/jobs/{job_id}").json()["sets"][0]["recipes"][0]
        if recipe["state"] == "running":
            return recipe["system"]
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} never ran")


def _retried(client, job_id, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sets = client.get(f"/jobs/{job_id}").json()["sets"]
        if len(sets) == 2 and sets[1]["recipes"][0]["system"] is not None:
            return sets
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} was not retried: {sets}")


def test_set_remove_and_summary(server, tmp_path):
    client, _, env = server
    _ok(env, "lab", "add", "lab1")
    _ok(env, "lab", "add", "lab2")
    _ok(env, "pool", "add", "perf")
    _ok(env, "system", "add", "a.lab1", "--lab", "lab1")
    _ok(env, "system", "add", "b.lab1", "--lab", "lab1", "--attr", "slow=1")
    # only a.lab1 is free: b.lab1 waits in lab2 for now
    moved = _ok(env, "system", "set", "b.lab1", "--lab", "lab2", "--pool", "perf",
                "--attr", "cpus=4", "--unset-attr", "slow")  # fmt: skip
    assert moved["fields"] == ["lab", "attributes", "pools"]
    assert (moved["lab"], moved["pools"], moved["attributes"]) == ("lab2", ["perf"], {"cpus": 4})
    summary = _ok(env, "system", "summary")
    assert [(row["lab"], row["total"], row["idle"]) for row in summary["labs"]] == [
        ("lab1", 1, 1),
        ("lab2", 1, 1),
    ]
    assert "perf" in cli(env, "system", "summary").stdout

    (tmp_path / "long.yaml").write_text(LONG)
    job_id = _ok(env, "job", "submit", str(tmp_path / "long.yaml"))["id"]
    assert _running_on(client, job_id) == "a.lab1"
    assert _ok(env, "system", "summary", "--lab", "lab1")["labs"][0]["running"] == 1

    refused = cli(env, "system", "remove", "a.lab1")
    assert refused.returncode != 0
    assert refused.stderr.count("\n") == 1
    assert "--force" in refused.stderr
    busy = cli(env, "system", "set", "a.lab1", "--lab", "lab2")
    assert busy.returncode != 0
    assert "serves recipe" in busy.stderr

    # back in lab1, b.lab1 is where the retry can go once a.lab1 is gone
    _ok(env, "system", "set", "b.lab1", "--lab", "lab1")
    removed = _ok(env, "system", "remove", "a.lab1", "--force", "--reason", "failed PSU")
    assert removed["changed"] is True
    assert removed["aborted_set"] is not None
    first, retry = _retried(client, job_id)
    assert first["recipes"][0]["state"] == "aborted"
    assert "a.lab1 was removed" in first["stop_reason"]
    assert retry["retry_of"] == first["id"]
    assert retry["recipes"][0]["system"] == "b.lab1"
    _ok(env, "job", "cancel", str(job_id))
    assert wait_for(client, job_id, timeout=60)["state"] == "cancelled"

    history = _ok(env, "system", "history", "a.lab1")
    assert history["history"][-1]["condition"] == "removed"
    assert any(c["reason"] == "failed PSU" for c in history["changes"])
    shown = cli(env, "system", "history", "b.lab1").stdout
    assert "lab1" in shown
    assert "lab2" in shown
    assert _ok(env, "system", "summary", "--lab", "lab1")["labs"][0]["total"] == 1
