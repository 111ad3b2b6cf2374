"""Two ``labq server`` processes on one PostgreSQL: one scheduler at a time, and a take-over.

Skipped without PostgreSQL, failed in CI (``CI=true``) — see ``database_url``.
"""

from __future__ import annotations

import signal
import time

import pytest

from tests.acceptance.test_restarts import (
    SLOW_JOB,
    LabServer,
    add_lab,
    job_state,
    submit,
    wait_until,
)

QUICK_JOB = """
recipe_sets:
  - recipes:
      - tasks:
          - {name: quick, run: 'echo quick > quick.txt', timeout: 30}
"""

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.parametrize("database_url", ["postgres"], indirect=True),
]


@pytest.fixture
def lab(database_url, tmp_path):
    server = LabServer(database_url, tmp_path)
    yield server
    server.close()


def role(client) -> str:
    return client.get("/health").json()["scheduler"]


def test_one_leader_a_standby_forwards_events_and_takes_over(lab):
    first_proc, first = lab.start()
    wait_until(lambda: role(first) == "leader", "the first server to lead", timeout=10)
    _, second = lab.start()
    time.sleep(2.5)  # more than one campaign round: the standby tried and lost
    assert (role(first), role(second)) == ("leader", "standby")

    # a job submitted through the standby reaches the leader by NOTIFY and runs
    add_lab(second, "a.lab1", "b.lab1")
    job_id = submit(second, QUICK_JOB)
    job = wait_until(lambda: job_state(second, job_id, "completed", "aborted"), "the job", 20)
    assert job["state"] == "completed", job

    # a job running when the leader dies is adopted and finishes; a new one runs too
    slow_id = submit(second, SLOW_JOB)
    wait_until(lambda: second.get(f"/jobs/{slow_id}").json()["state"] == "running", "the slow job")
    first_proc.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    first_proc.wait()
    wait_until(lambda: role(second) == "leader", "the standby to take over", timeout=15, every=0.1)
    took = time.monotonic() - killed
    print(f"take-over after {took:.1f} s")
    assert took < 10
    new_id = submit(second, QUICK_JOB)
    for jid in (slow_id, new_id):
        job = wait_until(lambda jid=jid: job_state(second, jid, "completed", "aborted"), "a job")
        assert job["state"] == "completed", job
        assert len(job["sets"]) == 1, "nothing was run twice"
