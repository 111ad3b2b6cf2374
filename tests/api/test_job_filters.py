"""GET /jobs: filters by whiteboard, run and lab; owner, run, waited time and the reason shown."""

from __future__ import annotations

from labq.gateway.events import QueueRow
from tests.api.conftest import Lab, submit

NATIVE = "recipe_sets:\n- recipes:\n  - role: r0\n    tasks:\n    - {name: t, run: 'true'}\n"


def _ids(on: Lab, **params: str | int) -> list[int]:
    return [j["id"] for j in on.get("/jobs", **params).json()["jobs"]]


def test_filters_by_whiteboard_run_owner_and_lab(lab: Lab) -> None:
    nightly = submit(lab, "alice", whiteboard="Nightly [kernel] 5.14")
    weekly = submit(lab, "bob", whiteboard="weekly 100%")
    body = {"name": "fs-run", "jobs": [{"name": "a", "document": NATIVE}]}
    (in_run,) = lab.post("/runs", who="carol", json=body).json()["jobs"]
    assert _ids(lab, whiteboard="nightly*") == [nightly]
    assert _ids(lab, whiteboard="*[kernel]*") == [nightly]  # brackets are plain text
    assert _ids(lab, whiteboard="*100%") == [weekly]  # so is SQL's %
    assert _ids(lab, whiteboard="weekly 1_0%") == []  # and _
    assert _ids(lab, run="fs-run") == [in_run]
    assert _ids(lab, run="nope") == []
    assert _ids(lab, owner="bob", whiteboard="w?ekly*") == [weekly]
    assert _ids(lab, **{"lab": "lab1"}) == []  # nothing started anywhere yet
    assert lab.get("/jobs", run="").status_code == 422


def test_rows_show_run_waited_time_and_the_reason_of_waiting_jobs(lab: Lab) -> None:
    job = submit(lab, "alice", whiteboard="hello")
    lab.clock.advance(90)
    why = "waits for 1 system matching arch=aarch64: 1 busy until ~14:05 UTC"
    lab.events.rows = [QueueRow(1, job, 1, "normal", "normal", 90, "none", None, reason=why)]
    (row,) = lab.get("/jobs").json()["jobs"]
    assert (row["owner"], row["whiteboard"], row["run"]) == ("alice", "hello", None)
    assert (row["waited_s"], row["elapsed_s"]) == (90.0, None)
    assert row["reason"] == why
    lab.post(f"/jobs/{job}/cancel", who="alice")
    (ended,) = lab.get("/jobs").json()["jobs"]
    assert (ended["waited_s"], ended["reason"]) == (None, None)  # never started
