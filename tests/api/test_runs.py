"""/runs: a run is stored whole or not at all; counts, listing, showing and cancelling it."""

from __future__ import annotations

from typing import Any

from labq.domain.events import JobsCancelled, JobSubmitted
from tests.api.conftest import Lab

NATIVE = "recipe_sets:\n- recipes:\n  - role: r0\n    tasks:\n    - {name: t, run: 'true'}\n"
TEUTHOLOGY = "roles:\n- [mon.a, osd.0]\ntasks:\n- exec:\n    mon.a: [echo hi]\n"


def docs(*texts: str) -> list[dict[str, Any]]:
    return [{"name": f"doc{i}.yaml", "document": t} for i, t in enumerate(texts)]


def test_a_run_is_submitted_whole_and_shown_with_counts(lab: Lab) -> None:
    body = {"name": "nightly-1", "metadata": {"suite": "smoke"}, "jobs": docs(NATIVE, TEUTHOLOGY)}
    answer = lab.post("/runs", who="alice", json=body)
    assert answer.status_code == 201, answer.text
    ids = answer.json()["jobs"]
    assert len(ids) == 2
    assert lab.events.calls == [(JobSubmitted(i), True) for i in ids]
    shown = lab.get("/runs/nightly-1").json()
    assert shown["counts"] == {"queued": 2, "running": 0, "pass": 0, "fail": 0, "dead": 0}
    assert [j["id"] for j in shown["jobs"]] == ids
    assert [j["source_format"] for j in shown["jobs"]] == ["native", "teuthology"]
    assert shown["metadata"] == {"suite": "smoke"}
    listed = lab.get("/runs").json()
    assert listed["total"] == 1
    assert listed["runs"][0]["name"] == "nightly-1"
    assert listed["runs"][0]["owner"] == "alice"


def test_one_bad_document_refuses_the_run_naming_it(lab: Lab) -> None:
    body = {"name": "broken", "jobs": docs(NATIVE, "roles: []\n")}
    answer = lab.post("/runs", who="alice", json=body)
    assert answer.status_code == 422
    assert answer.json()["error"]["message"].startswith("doc1.yaml:1: roles:")
    assert lab.get("/runs/broken").status_code == 404
    assert lab.get("/jobs").json()["total"] == 0
    assert lab.events.calls == []


def test_an_unrunnable_job_refuses_the_run_and_stores_nothing(lab: Lab) -> None:
    unrunnable = NATIVE.replace("role: r0", "role: r0\n    host: {machine_type: nowhere}")
    answer = lab.post("/runs", who="alice", json={"name": "x", "jobs": docs(NATIVE, unrunnable)})
    assert answer.status_code == 422, answer.text
    assert lab.get("/runs").json()["total"] == 0
    assert lab.get("/jobs").json()["total"] == 0


def test_run_names_are_unique(lab: Lab) -> None:
    assert (
        lab.post("/runs", who="alice", json={"name": "r", "jobs": docs(NATIVE)}).status_code == 201
    )
    again = lab.post("/runs", who="bob", json={"name": "r", "jobs": docs(NATIVE)})
    assert again.status_code == 409
    assert "already a run named 'r'" in again.json()["error"]["message"]
    bad = lab.post("/runs", who="bob", json={"name": "a b", "jobs": docs(NATIVE)})
    assert bad.status_code == 422


def test_cancelling_a_run_cancels_its_jobs_with_permissions(lab: Lab) -> None:
    ids = lab.post("/runs", who="alice", json={"name": "r", "jobs": docs(NATIVE, NATIVE)}).json()
    lab.events.calls.clear()
    refused = lab.post("/runs/r/cancel", who="bob")
    assert refused.status_code == 403
    assert lab.get("/runs/r").json()["counts"]["queued"] == 2
    done = lab.post("/runs/r/cancel", who="alice", json={"reason": "wrong branch"})
    cancelled = {str(i): 1 for i in ids["jobs"]}
    assert done.json() == {"name": "r", "cancelled": cancelled, "note": None}
    assert lab.events.calls == [(JobsCancelled(i), True) for i in ids["jobs"]]
    assert lab.get("/runs/r").json()["counts"]["dead"] == 2
    assert lab.post("/runs/r/cancel", who="alice").json() == {
        "name": "r",
        "cancelled": {},
        "note": "run r has no job left to cancel: each has ended or is being cancelled",
    }
    assert lab.post("/runs/none/cancel", who="alice").status_code == 404
