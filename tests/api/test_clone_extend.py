"""Clone (and source) and extend through the API: who may, what changes, what is refused."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, delete

from labq.config import Settings
from labq.dispatch.database_reporter import DatabaseReporter
from labq.domain.events import JobSubmitted
from labq.formats.limits import Limits
from labq.service.loop import SchedulerService
from labq.store import make_engine, reading, transaction
from labq.store.tables import JobSources
from labq.webapp import create_app
from tests.api.conftest import (
    API,
    EXAMPLES,
    Clock,
    Lab,
    RecordingDispatcher,
    TestClient,
    add_example_systems,
    seed,
    submit,
)

COMMENTED = """# kept as written, comments and all
whiteboard: first
recipe_sets:
  - recipes:
      - tasks:
          - {name: t, run: "true"}   # inline
"""


def post_doc(lab: Lab, text: str, media: str, who: str = "alice") -> int:
    answer = lab.client.post(
        f"{API}/jobs", content=text.encode(), headers={**lab.auth(who), "Content-Type": media}
    )
    assert answer.status_code == 201, answer.text
    job_id: int = answer.json()["id"]
    return job_id


# --- source ----------------------------------------------------------------------------


def test_source_is_the_document_as_submitted_in_its_own_content_type(lab: Lab) -> None:
    add_example_systems(lab.engine)
    yaml_job = post_doc(lab, COMMENTED, "application/yaml")
    beaker = (EXAMPLES / "beaker.xml").read_text()
    xml_job = post_doc(lab, beaker, "application/xml")
    json_job = submit(lab)
    answer = lab.get(f"/jobs/{yaml_job}/source", who="bob")  # any reader
    assert answer.status_code == 200
    assert answer.text == COMMENTED
    assert answer.headers["content-type"].startswith("application/yaml")
    xml = lab.get(f"/jobs/{xml_job}/source")
    assert (xml.text, xml.headers["content-type"]) == (beaker, "application/xml")
    assert lab.get(f"/jobs/{json_job}/source").headers["content-type"] == "application/json"
    missing = lab.get("/jobs/99/source")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "no job 99"


# --- clone -----------------------------------------------------------------------------


def test_anyone_may_clone_and_the_clone_is_theirs_and_links_back(lab: Lab) -> None:
    original = post_doc(lab, COMMENTED, "application/yaml", who="alice")
    lab.events.calls.clear()
    answer = lab.post(f"/jobs/{original}/clone", who="bob")
    assert answer.status_code == 201, answer.text
    clone = answer.json()["id"]
    assert answer.json() == {
        "id": clone,
        "cloned_from": original,
        "format": "native",
        "url": f"/api/v1/jobs/{clone}",
    }
    shown = lab.get(f"/jobs/{clone}").json()
    assert (shown["owner"], shown["cloned_from"], shown["whiteboard"]) == ("bob", original, "first")
    assert lab.get(f"/jobs/{original}").json()["cloned_from"] is None
    assert lab.get(f"/jobs/{clone}/source").text == COMMENTED  # unchanged: the same document
    assert lab.events.calls == [(JobSubmitted(clone), True)]
    with reading(lab.engine) as repo:
        assert repo.sources.clones_of(original) == [clone]


def test_a_group_job_is_cloned_by_a_non_member_only_into_another_group(lab: Lab) -> None:
    grouped = submit(lab, "alice", group="kernel-qe")
    refused = lab.post(f"/jobs/{grouped}/clone", who="bob")
    assert refused.status_code == 403
    assert refused.json()["error"] == {
        "status": 403,
        "message": "'bob' is not a member of group 'kernel-qe'",
        "place": "group",
    }
    assert lab.get("/jobs").json()["total"] == 1  # nothing stored
    moved = lab.post(f"/jobs/{grouped}/clone", who="bob", json={"group": "everybody"})
    assert moved.status_code == 201
    assert lab.get(f"/jobs/{moved.json()['id']}").json()["group"] == "everybody"
    member = lab.post(f"/jobs/{grouped}/clone", who="carol")
    assert lab.get(f"/jobs/{member.json()['id']}").json()["group"] == "kernel-qe"


def test_a_clone_with_changes_takes_them_and_shows_its_spec_as_source(lab: Lab) -> None:
    original = post_doc(lab, COMMENTED, "application/yaml")
    body = {"priority": "low", "whiteboard": "again"}
    answer = lab.post(f"/jobs/{original}/clone", who="alice", json=body)
    assert answer.status_code == 201
    clone = lab.get(f"/jobs/{answer.json()['id']}").json()
    assert clone["whiteboard"] == "again"
    assert [s["priority"] for s in clone["sets"]] == ["low"]
    source = lab.get(f"/jobs/{clone['id']}/source")
    assert source.headers["content-type"] == "application/json"
    assert source.json()["whiteboard"] == "again"
    assert source.json()["recipe_sets"][0]["priority"] == "low"
    # a clone of that clone keeps its changes
    again = lab.post(f"/jobs/{clone['id']}/clone", who="alice").json()["id"]
    assert lab.get(f"/jobs/{again}").json()["whiteboard"] == "again"
    assert lab.get(f"/jobs/{again}").json()["cloned_from"] == clone["id"]


@pytest.mark.parametrize(
    ("body", "place"),
    [
        ({"priority": "highest"}, "priority"),
        ({"whiteboard": 5}, "whiteboard"),
        ({"group": ""}, "group"),
        ({"owner": "bob"}, "owner"),
    ],
)
def test_bad_clone_bodies_are_refused_naming_the_field(lab: Lab, body: Any, place: str) -> None:
    job = submit(lab)
    answer = lab.post(f"/jobs/{job}/clone", who="alice", json=body)
    assert answer.status_code == 422
    assert answer.json()["error"]["place"] == place
    assert lab.get("/jobs").json()["total"] == 1
    assert lab.post("/jobs/42/clone", who="alice").status_code == 404


def test_a_job_without_a_kept_document_clones_from_its_canonical_spec(lab: Lab) -> None:
    old = post_doc(lab, COMMENTED, "application/yaml")
    with transaction(lab.engine) as repo:  # as if submitted before documents were kept
        repo.conn.execute(delete(JobSources).where(JobSources.job_id == old))
    source = lab.get(f"/jobs/{old}/source")
    assert source.headers["content-type"] == "application/json"
    assert source.json()["recipe_sets"][0]["recipes"][0]["tasks"][0]["run"] == "true"
    assert "owner" not in source.json() or source.json()["owner"] is None
    clone = lab.post(f"/jobs/{old}/clone", who="bob").json()["id"]
    shown = lab.get(f"/jobs/{clone}").json()
    assert shown["whiteboard"] == "first"
    assert shown["sets"][0]["recipes"][0]["tasks"][0]["name"] == "t"


# --- extend (over a running scheduler, so sets really start) -------------------------


@dataclass
class Live:
    client: TestClient
    engine: Engine
    service: SchedulerService
    dispatcher: RecordingDispatcher
    tokens: dict[str, str]

    def auth(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    def submit(self, max_time: int | None = 60, **fields: Any) -> int:
        rset: dict[str, Any] = {"recipes": [{"tasks": [{"name": "t", "run": "true"}]}]}
        if max_time is not None:
            rset["max_time"] = max_time
        answer = self.client.post(
            f"{API}/jobs", json={"recipe_sets": [rset], **fields}, headers=self.auth("alice")
        )
        assert answer.status_code == 201, answer.text
        self.service.drain()
        job_id: int = answer.json()["id"]
        return job_id

    def extend(self, job_id: int, who: str, **body: Any) -> Any:
        return self.client.post(f"{API}/jobs/{job_id}/extend", json=body, headers=self.auth(who))

    def set_of(self, job_id: int) -> dict[str, Any]:
        job = self.client.get(f"{API}/jobs/{job_id}", headers=self.auth("bob")).json()
        rset: dict[str, Any] = job["sets"][0]
        return rset


@pytest.fixture
def live(template: Path, tmp_path: Path) -> Iterator[Live]:
    path = tmp_path / "labq.db"
    shutil.copyfile(template, path)
    engine = make_engine(f"sqlite:///{path}")
    tokens = seed(engine)
    settings = Settings(
        data_dir=str(tmp_path / "data"),
        consistency_every=30 * 86400,
        limits=Limits(max_extend=600),
    )
    dispatcher = RecordingDispatcher()
    clock = Clock()
    service = SchedulerService.elected(engine, settings, dispatcher, holder="test", clock=clock)
    service.start()
    app = create_app(engine, settings, service, clock=clock)
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            yield Live(client, engine, service, dispatcher, tokens)
    finally:
        service.stop()
        engine.dispose()


def test_extend_is_for_the_owner_the_group_and_admins(live: Live) -> None:
    job = live.submit(group="kernel-qe")
    (set_id,) = live.dispatcher.started
    refused = live.extend(job, "bob", by=60)
    assert refused.status_code == 403
    assert "may not change it" in refused.json()["error"]["message"]
    assert live.set_of(job)["extended"] == 0
    assert live.extend(job, "alice", by=60).json() == {
        "id": job,
        "by": 60,
        "sets": [{"id": set_id, "max_time": 120, "extended": 60}],
    }
    assert live.extend(job, "carol", by=30, set=set_id).json()["sets"][0]["max_time"] == 150
    assert live.extend(job, "root", by=10).status_code == 200
    shown = live.set_of(job)
    assert (shown["max_time"], shown["extended"]) == (60, 100)


def test_extend_stops_at_the_ceiling_in_one_line_and_changes_nothing(live: Live) -> None:
    job = live.submit()
    assert live.extend(job, "alice", by=500).status_code == 200
    over = live.extend(job, "root", by=101)  # admins too: the ceiling is the admins' own
    assert over.status_code == 422
    assert over.json()["error"] == {
        "status": 422,
        "message": "by: set 1 would be extended by 601 s in all, more than the limit of 600 s"
        " (limits.max_extend)",
        "place": "by",
    }
    assert live.set_of(job)["extended"] == 500
    assert live.extend(job, "alice", by=100).status_code == 200


def test_extend_refuses_what_is_not_a_running_set_with_a_max_time(live: Live) -> None:
    running = live.submit(group="kernel-qe")
    untimed = live.submit(max_time=None, group="kernel-qe")  # the other system: starts too
    waiting = live.submit()  # no system left: it waits
    assert len(live.dispatcher.started) == 2
    cases = [
        (untimed, {"by": 60}, 409, "job 2 has no running set with a max_time to extend"),
        (untimed, {"by": 60, "set": 2}, 409, "set 2 has no max_time to extend"),
        (waiting, {"by": 60}, 409, "job 3 has not started: only a running set is extended"),
        (
            waiting,
            {"by": 60, "set": 3},
            409,
            "set 3 is not running; only a running set is extended",
        ),
        (running, {"by": 60, "set": 2}, 404, "job 1 has no set 2"),
        (99, {"by": 60}, 404, "no job 99"),
    ]
    for job, body, status, message in cases:
        answer = live.extend(job, "root", **body)
        assert (answer.status_code, answer.json()["error"]["message"]) == (status, message)
    cancel = f"{API}/jobs/{waiting}/cancel"
    assert live.client.post(cancel, headers=live.auth("root")).status_code == 200
    ended = live.extend(waiting, "root", by=60)
    assert ended.json()["error"]["message"] == f"job {waiting} has ended: nothing to extend"
    for body, place in (
        ({"by": 0}, "by"),
        ({"by": "1h"}, "by"),
        ({}, "by"),
        ({"by": 5, "x": 1}, "x"),
    ):
        answer = live.extend(running, "root", **body)
        assert answer.status_code == 422
        assert answer.json()["error"]["place"] == place
    assert live.set_of(running)["extended"] == 0


def test_the_supervisors_heartbeat_hears_the_extended_max_time(live: Live) -> None:
    job = live.submit()
    (set_id,) = live.dispatcher.started
    with transaction(live.engine) as repo:
        claim = repo.supervisors.claim_of(set_id)
        assert claim is not None
        repo.supervisors.confirm_claim(set_id, claim, 4242, "here", now=Clock()())
    reporter = DatabaseReporter(live.engine, set_id, claim)
    assert reporter.heartbeat() == 60.0
    live.extend(job, "alice", by=90)
    assert reporter.heartbeat() == 150.0
    assert not reporter.cancel.is_set()
