"""POST /jobs/cancel and /jobs/priority: many jobs by filter in one request, permissions per job."""

from __future__ import annotations

from labq.domain.events import JobsCancelled, PriorityChanged
from tests.api.conftest import Lab, submit

NATIVE = "recipe_sets:\n- recipes:\n  - role: r0\n    tasks:\n    - {name: t, run: 'true'}\n"


def _state(lab: Lab, job: int) -> str:
    state: str = lab.get(f"/jobs/{job}").json()["state"]
    return state


def test_cancel_by_owner_changes_only_what_the_caller_may(lab: Lab) -> None:
    mine = submit(lab, "alice", whiteboard="nightly kernel")
    grouped = submit(lab, "alice", group="kernel-qe", whiteboard="nightly fs")
    bobs = submit(lab, "bob", whiteboard="nightly bob")
    lab.events.calls.clear()
    # carol may cancel alice's group job, not her private one
    answer = lab.post("/jobs/cancel", who="carol", json={"owner": "alice"}).json()
    assert answer["matched"] == 2
    assert answer["changed"] == [{"id": grouped, "cancelled": 1}]
    assert answer["refused"] == [
        {"id": mine, "reason": f"job {mine} belongs to 'alice'; 'carol' may not change it"}
    ]
    assert answer["unchanged"] == 0
    assert (_state(lab, mine), _state(lab, grouped), _state(lab, bobs)) == (
        "new",
        "cancelled",
        "new",
    )
    assert lab.events.calls == [(JobsCancelled(grouped), True)]
    # the same filter again: nothing left to cancel; the ended job is unchanged
    again = lab.post("/jobs/cancel", who="alice", json={"owner": "alice"}).json()
    assert (again["changed"], again["unchanged"], again["refused"]) == (
        [{"id": mine, "cancelled": 1}],
        1,
        [],
    )


def test_a_dry_run_counts_and_changes_nothing(lab: Lab) -> None:
    jobs = [submit(lab, "alice", whiteboard=f"nightly {i}") for i in range(3)]
    other = submit(lab, "alice", whiteboard="weekly")
    lab.events.calls.clear()
    body = {"whiteboard": "NIGHTLY*", "dry_run": True}
    answer = lab.post("/jobs/cancel", who="alice", json=body).json()
    assert [c["id"] for c in answer["changed"]] == jobs
    assert answer["dry_run"] is True
    assert {_state(lab, j) for j in [*jobs, other]} == {"new"}
    assert lab.events.calls == []


def test_cancel_by_run_and_by_age(lab: Lab) -> None:
    body = {"name": "nightly-7", "jobs": [{"name": "a", "document": NATIVE}] * 2}
    run_jobs = lab.post("/runs", who="alice", json=body).json()["jobs"]
    lab.clock.advance(7200)
    young = submit(lab, "alice")
    by_run = lab.post("/jobs/cancel", who="alice", json={"run": "nightly-7"}).json()
    assert [c["id"] for c in by_run["changed"]] == run_jobs
    old = lab.post("/jobs/cancel", who="alice", json={"older_than_s": 3600}).json()
    assert (old["matched"], old["changed"]) == (2, [])  # the run's jobs: already cancelled
    assert _state(lab, young) == "new"


def test_priority_by_filter_refuses_raising_without_admin(lab: Lab) -> None:
    low = submit(lab, "alice")
    normal = submit(lab, "alice")
    assert lab.post(f"/jobs/{low}/priority", who="alice", json={"priority": "low"}).is_success
    lab.events.calls.clear()
    body = {"owner": "alice", "priority": "normal"}
    answer = lab.post("/jobs/priority", who="alice", json=body).json()
    assert answer["priority"] == "normal"
    assert answer["changed"] == []
    assert answer["unchanged"] == 1  # already normal
    assert answer["refused"] == [
        {"id": low, "reason": f"raising job {low} from low to normal needs an admin"}
    ]
    lowered = lab.post("/jobs/priority", who="alice", json={**body, "priority": "low"}).json()
    assert lowered["changed"] == [{"id": normal, "sets": 1}]
    assert lab.events.calls == [(PriorityChanged(normal), True)]
    raised = lab.post("/jobs/priority", who="root", json={"ids": [low, normal], "priority": "high"})
    assert [c["id"] for c in raised.json()["changed"]] == [low, normal]


def test_bad_filters_are_refused_naming_the_field(lab: Lab) -> None:
    empty = lab.post("/jobs/cancel", who="alice", json={})
    assert empty.status_code == 422
    assert empty.json()["error"]["message"] == "give job ids or at least one filter"
    for body, place in (
        ({"state": "sleeping"}, "state"),
        ({"older_than_s": -5}, "older_than_s"),
        ({"owner": "alice", "colour": "red"}, "colour"),
        ({"ids": ["x"]}, "ids"),
    ):
        refused = lab.post("/jobs/cancel", who="alice", json=body)
        assert refused.status_code == 422, body
        assert place in refused.text, refused.text
    assert lab.post("/jobs/priority", who="alice", json={"owner": "a"}).status_code == 422
