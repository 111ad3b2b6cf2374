"""A job whose first attempt times out and whose retry passes has ended only once, passed.

``labq job submit --wait`` and every reading of the job's state agree: a job
reported ended never changes afterwards, even while its retry is being made.
"""

from __future__ import annotations

import subprocess
import threading
import time

from tests.acceptance.conftest import cli, labq_command

# The first attempt leaves a mark outside the workspaces and overruns its timeout;
# the retry (on the other system) finds the mark and passes.
FLAKY = """
whiteboard: passes on the second attempt
recipe_sets:
  - max_retries: 2
    recipes:
      - tasks:
          - name: flaky
            run: 'if [ -e {mark} ]; then echo second; else touch {mark}; sleep 30; fi'
            timeout: 2
"""
FINAL = ("completed", "aborted", "cancelled")


def test_submit_wait_waits_for_the_retry_and_ended_means_ended(server, tmp_path):
    client, _, env = server
    assert cli(env, "lab", "add", "lab1").returncode == 0
    for fqdn in ("a.lab1", "b.lab1"):
        assert cli(env, "system", "add", fqdn, "--lab", "lab1").returncode == 0
    job_file = tmp_path / "flaky.yaml"
    job_file.write_text(FLAKY.format(mark=tmp_path / "first-attempt-ran"))
    waiting = subprocess.Popen(
        [*labq_command(), "job", "submit", str(job_file), "--wait"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[tuple[str, str]] = []  # (the job's state, its current attempts' states)
    watching = threading.Thread(target=_watch, args=(client, seen, waiting), daemon=True)
    watching.start()
    out, err = waiting.communicate(timeout=90)
    watching.join(10)
    assert waiting.returncode == 0, (out, err)
    assert out.splitlines()[-1] == "job 1 completed: pass"
    results = client.get("/jobs/1/results").json()
    assert [s["attempt"] for s in results["sets"]] == [1, 2]
    assert [s["state"] for s in results["sets"]] == ["aborted", "completed"]
    # once the API said the job ended, it never said anything else
    states = [state for state, _ in seen]
    assert "new" in states or "running" in states
    first_end = next(i for i, state in enumerate(states) if state in FINAL)
    assert set(states[first_end:]) == {"completed"}, seen


def _watch(client, seen, waiting) -> None:
    """Read the job as fast as the server answers until ``--wait`` has returned."""
    while waiting.poll() is None:
        answer = client.get("/jobs/1")
        if answer.status_code == 200:
            job = answer.json()
            seen.append((job["state"], ",".join(s["state"] for s in job["sets"])))
        time.sleep(0.01)
