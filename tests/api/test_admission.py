"""Eligibility before order, through the API with the scheduler service running.

Dependencies, every filter action, reason rate limits, paused lab queues (with
expiry) and the running limits. Most tests play the supervisors by hand (a set
"runs" when the test moves its recipes and reports the exit), so they decide
exactly when a set ends; the last ones run real supervisors on the local backend.
"""

from __future__ import annotations

import itertools
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from labq.config import Queue, Settings
from labq.dispatch.dispatcher import Dispatcher
from labq.domain.model import System
from labq.domain.states import RecipeState
from labq.service.inbox import Inbox
from labq.service.loop import SchedulerService
from labq.store import make_engine, reading, transaction
from labq.webapp import create_app

from .conftest import API, T0, RecordingDispatcher, TestClient, play_set, seed

QUICK = [{"name": "t", "run": "true"}]


@dataclass
class Live:
    """The API over a running scheduler service (real clock)."""

    client: TestClient
    engine: Engine
    service: SchedulerService
    dispatcher: RecordingDispatcher
    tokens: dict[str, str]

    def auth(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    def post(self, url: str, body: Any = None, who: str = "root") -> httpx.Response:
        answer: httpx.Response = self.client.post(API + url, json=body, headers=self.auth(who))
        self.service.drain()
        return answer

    def get(self, url: str, who: str = "bob") -> Any:
        answer = self.client.get(API + url, headers=self.auth(who))
        assert answer.status_code == 200, answer.text
        return answer.json()

    def submit_raw(
        self, who: str = "alice", lab: str | None = "lab1", **fields: Any
    ) -> httpx.Response:
        host = {} if lab is None else {"lab": lab}
        recipe_set = {"recipes": [{"host": host, "tasks": QUICK}]}
        return self.post("/jobs", {"recipe_sets": [recipe_set], **fields}, who=who)

    def submit(self, who: str = "alice", lab: str | None = "lab1", **fields: Any) -> int:
        """A one-recipe job; its id."""
        answer = self.submit_raw(who, lab, **fields)
        assert answer.status_code == 201, answer.text
        job_id: int = answer.json()["id"]
        return job_id

    def set_of(self, job_id: int) -> int:
        set_id: int = self.get(f"/jobs/{job_id}")["current_sets"][0]
        return set_id

    def started(self, job_id: int) -> bool:
        return self.set_of(job_id) in self.dispatcher.started

    def running(self) -> list[int]:
        """Sets handed on to run that have not ended."""
        with reading(self.engine) as repo:
            return [
                s
                for s in self.dispatcher.started
                if repo.jobs.get_recipe_set(s).finished_at is None
            ]

    def waits_for(self, job_id: int) -> str | None:
        set_id = self.set_of(job_id)  # a request: never under the service's lock (it takes it)
        with self.service.lock:
            core = self.service.core
            assert core is not None
            return core.waits_for(core.sets[set_id])

    def run(self, job_id: int, final: RecipeState = RecipeState.COMPLETED) -> None:
        """The job's set runs and ends ``final``; its supervisor exits."""
        set_id = self.set_of(job_id)
        assert set_id in self.dispatcher.started, f"set {set_id} never started"
        play_set(self.engine, self.service, set_id, final, now=self.service.clock())

    def job(self, job_id: int) -> Any:
        return self.get(f"/jobs/{job_id}")

    def history_reasons(self, job_id: int) -> set[str]:
        found = self.get(f"/jobs/{job_id}/history")
        return {h["reason"] for r in found["recipes"] for h in r["history"] if h["reason"]}


def more_systems(engine: Engine) -> None:
    """lab1 gets s3 and s4 (no pool: open to everybody); lab2 gets t1 and t2."""
    with transaction(engine) as repo:
        repo.systems.add_lab("lab2", actor="root", now=T0)
        for fqdn, lab in (
            ("s3.lab", "lab1"),
            ("s4.lab", "lab1"),
            ("t1.lab2", "lab2"),
            ("t2.lab2", "lab2"),
        ):
            repo.systems.add_system(System(fqdn, lab), actor="root", now=T0)


def seeded(template: Path, tmp_path: Path) -> tuple[Engine, dict[str, str]]:
    """A fresh copy of the migrated database, seeded as in conftest, with more systems."""
    path = tmp_path / "labq.db"
    shutil.copyfile(template, path)
    engine = make_engine(f"sqlite:///{path}")
    tokens = seed(engine)
    more_systems(engine)
    return engine, tokens


LiveFactory = Callable[..., Live]


@pytest.fixture
def make_live(template: Path, tmp_path: Path) -> Iterator[LiveFactory]:
    made: list[tuple[SchedulerService, Engine, TestClient]] = []

    def make(**queue: Any) -> Live:
        settings = Settings(
            data_dir=str(tmp_path / "data"), consistency_every=3600, queue=Queue(**queue)
        )
        engine, tokens = seeded(template, tmp_path)
        dispatcher = RecordingDispatcher()
        service = SchedulerService.elected(engine, settings, dispatcher, holder="test")
        service.start()
        client = TestClient(create_app(engine, settings, service), raise_server_exceptions=False)
        client.__enter__()
        made.append((service, engine, client))
        return Live(client, engine, service, dispatcher, tokens)

    yield make
    for service, engine, client in made:
        client.__exit__(None, None, None)
        service.stop()
        engine.dispose()


@pytest.fixture
def live(make_live: LiveFactory) -> Live:
    return make_live()


def wait_until(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# --- dependencies ----------------------------------------------------------------------


def test_a_dependent_waits_until_its_dependency_completes_then_runs(live: Live) -> None:
    first = live.submit()
    assert live.started(first)
    second = live.submit(depends=[first])
    assert not live.started(second)  # free systems, but it waits
    assert live.waits_for(second) == f"waits for job {first} to end (needs completed)"
    # a name is the newest earlier job with that whiteboard
    named = live.submit(whiteboard="build")
    third = live.submit(depends=["build", {"job": first, "on": ["completed", "aborted"]}])
    assert live.waits_for(third) == (
        f"waits for job {first} to end (needs completed or aborted),"
        f" job {named} to end (needs completed)"
    )
    live.run(first)
    assert live.started(second)
    assert live.waits_for(third) == f"waits for job {named} to end (needs completed)"
    live.run(named)
    assert live.started(third)
    assert live.job(second)["depends"] == [first]


def test_a_dependency_that_ends_otherwise_cancels_its_dependents_with_the_reason(
    live: Live,
) -> None:
    build = live.submit()
    test = live.submit(depends=[build])
    report = live.submit(depends=[test])  # a chain: it falls with the job it waits for
    cleanup = live.submit(depends=[{"job": build, "on": ["aborted"]}])
    live.run(build, RecipeState.ABORTED)
    needed = f"job {build} ended aborted; this job needed completed"
    shown = live.job(test)
    assert shown["state"] == "cancelled"
    assert [s["error"] for s in shown["sets"]] == [needed]
    assert needed in live.history_reasons(test)
    chained = live.job(report)
    assert chained["state"] == "cancelled"
    assert chained["sets"][0]["error"] == f"job {test} ended cancelled; this job needed completed"
    assert live.started(cleanup)  # it waited for exactly this
    assert not live.started(test)
    assert not live.started(report)


def test_dependencies_are_checked_at_submission_and_nothing_is_stored(live: Live) -> None:
    first = live.submit()
    live.run(first, RecipeState.ABORTED)
    jobs_before = live.get("/jobs")["total"]
    cases = [
        ([999], "depends[0]", "there is no job 999"),
        # the next id is the job's own: waiting for itself is a cycle
        ([first, first + 1], "depends[1]", "a job cannot wait for itself (a dependency cycle)"),
        ([first, {"job": first, "on": ["aborted"]}], "depends[1]", "listed twice"),
        ([first], "depends[0]", f"job {first} ended aborted; this job needs completed"),
        (["nightly"], "depends[0]", "no earlier job has the whiteboard 'nightly'"),
        ([{"job": first, "on": ["done"]}], "depends[0].on[0]", "'done' is not an end state"),
    ]
    for depends, place, message in cases:
        answer = live.submit_raw(depends=depends)
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert error["place"] == place
        assert message in error["message"]
    assert live.get("/jobs")["total"] == jobs_before
    ok = live.submit(depends=[{"job": first, "on": ["aborted", "cancelled"]}])
    assert live.started(ok)


# --- filters --------------------------------------------------------------------------


def add_filter(live: Live, **body: Any) -> int:
    answer = live.post("/filters", body)
    assert answer.status_code == 201, answer.text
    filter_id: int = answer.json()["id"]
    return filter_id


def test_pause_holds_matching_jobs_until_the_rule_goes(live: Live) -> None:
    rule = add_filter(live, action="pause", predicates=["whiteboard~nightly*"], comment="freeze")
    held = live.submit(whiteboard="nightly kernel")
    other = live.submit(whiteboard="daily")
    assert live.started(other)
    assert not live.started(held)
    assert live.waits_for(held) == f"paused by filter {rule}: freeze"
    gone = live.client.delete(f"{API}/filters/{rule}", headers=live.auth("root"))
    assert gone.status_code == 200, gone.text
    live.service.drain()
    assert live.started(held)


def test_accept_decides_first_and_continue_does_not_decide(live: Live) -> None:
    add_filter(live, action="continue", priority=0, predicates=["owner=carol"])
    add_filter(live, action="accept", priority=5, predicates=["owner=alice", "job>=1"])
    pause_all = add_filter(live, action="pause", priority=10, comment="maintenance")
    alice = live.submit("alice")
    carol = live.submit("carol")  # continue matched, then pause decided
    bob = live.submit("bob")
    assert live.started(alice)
    assert live.waits_for(carol) == f"paused by filter {pause_all}: maintenance"
    assert live.waits_for(bob) == f"paused by filter {pause_all}: maintenance"
    listed = live.get("/filters")["filters"]
    assert [(f["priority"], f["action"]) for f in listed] == [
        (0, "continue"),
        (5, "accept"),
        (10, "pause"),
    ]
    assert listed[1]["predicates"] == ["owner=alice", "job>=1"]
    assert listed[1]["created_by"] == "root"


def test_reject_refuses_new_jobs_and_cancels_queued_ones(live: Live) -> None:
    running = live.submit("bob")
    pause = add_filter(live, action="pause", priority=10, predicates=["owner=bob"])
    queued = live.submit("bob")
    mine = live.submit("alice")
    assert live.started(running)
    assert live.started(mine)
    assert not live.started(queued)
    rule = add_filter(live, action="reject", predicates=["owner=bob"], comment="bob is on leave")
    assert live.job(running)["state"] != "cancelled"  # rules apply to sets not started yet
    cancelled = live.job(queued)
    assert cancelled["state"] == "cancelled"
    reason = f"rejected by filter {rule}: bob is on leave"
    assert cancelled["sets"][0]["error"] == reason
    assert reason in live.history_reasons(queued)
    total = live.get("/jobs")["total"]
    refused = live.submit_raw("bob")
    assert refused.status_code == 409
    assert refused.json()["error"]["message"] == f"the job is refused: {reason}"
    assert live.get("/jobs")["total"] == total
    assert (
        live.client.delete(f"{API}/filters/{pause}", headers=live.auth("root")).status_code == 200
    )
    assert live.submit_raw("alice").status_code == 201


def test_rate_limit_lets_n_matching_sets_run_at_once(live: Live) -> None:
    rule = add_filter(live, action="rate-limit", rate=1, predicates=["group=everybody"])
    first = live.submit(lab=None)
    second = live.submit(lab=None)
    grouped = live.submit(lab=None, group="kernel-qe")  # not matched: runs
    assert live.started(first)
    assert live.started(grouped)
    assert not live.started(second)
    assert live.waits_for(second) == f"rate limit filter:{rule}: 1 of 1 running"
    live.run(first)
    assert live.started(second)


def test_filter_changes_are_for_admins_and_checked(live: Live) -> None:
    denied = live.post("/filters", {"action": "pause"}, who="alice")
    assert denied.status_code == 403
    assert live.get("/filters", who="alice") == {"filters": []}
    bad = [
        ({"action": "pause", "predicates": ["colour=red"]}, "predicates[0]", "unknown field"),
        ({"action": "pause", "predicates": ["job~12"]}, "predicates[0]", "job takes one of"),
        ({"action": "rate-limit"}, "rate", "needs a rate"),
        ({"action": "pause", "rate": 2}, "rate", "only rate-limit takes a rate"),
        ({"action": "hold"}, "action", "accept"),
    ]
    for body, place, message in bad:
        answer = live.post("/filters", body)
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["place"] == place
        assert message in answer.json()["error"]["message"]
    missing = live.client.delete(f"{API}/filters/42", headers=live.auth("root"))
    assert missing.status_code == 404
    assert live.get("/filters") == {"filters": []}


# --- reason rate limits ----------------------------------------------------------------


def test_reason_rate_limits_cap_jobs_with_the_same_label(live: Live) -> None:
    nightly = [live.submit(lab=None, reason="nightly run rate-limit:2:nightly") for _ in range(3)]
    other = live.submit(lab=None, reason="rate-limit:2:weekly")
    assert [live.started(j) for j in nightly] == [True, True, False]
    assert live.started(other)
    assert live.waits_for(nightly[2]) == "rate limit reason:nightly: 2 of 2 running"
    live.run(nightly[0])
    assert live.started(nightly[2])
    bad = live.submit_raw(reason="rate-limit:0:nightly")
    assert bad.status_code == 422
    assert bad.json()["error"]["place"] == "reason"


# --- paused lab queues -----------------------------------------------------------------


def test_a_paused_lab_resumes_by_itself_when_the_pause_ends(live: Live) -> None:
    paused = live.post("/queue/pause", {"lab": "lab1", "for_s": 1.0, "reason": "rack move"})
    assert paused.status_code == 200, paused.text
    assert paused.json()["reason"] == "rack move"
    job = live.submit(lab="lab1")
    elsewhere = live.submit(lab="lab2")
    assert live.started(elsewhere)
    assert not live.started(job)
    (listed,) = live.get("/queue/pauses")["pauses"]
    assert (listed["lab"], listed["paused_by"]) == ("lab1", "root")
    wait_until(lambda: live.started(job), "the pause to end", timeout=5)
    assert live.get("/queue/pauses") == {"pauses": []}


def test_pause_and_resume_by_hand(live: Live) -> None:
    assert live.post("/queue/pause", {"lab": "lab1"}, who="alice").status_code == 403
    assert live.post("/queue/pause", {"lab": "lab1"}).status_code == 200
    job = live.submit(lab="lab1")
    assert not live.started(job)
    resumed = live.post("/queue/resume", {"lab": "lab1"})
    assert resumed.json() == {"lab": "lab1", "resumed": True}
    assert live.started(job)
    assert live.post("/queue/resume", {"lab": "lab1"}).json()["resumed"] is False
    bad = [
        ({"lab": "lab9"}, 404, None),
        ({"lab": "lab1", "until": "2000-01-01T00:00:00+00:00"}, 422, "until"),
        ({"lab": "lab1", "until": "2999-01-01T00:00:00"}, 422, "until"),
        ({"lab": "lab1", "until": "soon"}, 422, "until"),
        ({"lab": "lab1", "for_s": 60, "until": "2999-01-01T00:00:00Z"}, 422, "for_s"),
        ({"lab": "lab1", "for_s": 0}, 422, "for_s"),
    ]
    for body, status, place in bad:
        answer = live.post("/queue/pause", body)
        assert answer.status_code == status, (body, answer.text)
        if place is not None:
            assert answer.json()["error"]["place"] == place
    assert live.get("/queue/pauses") == {"pauses": []}


def test_pauses_and_blocks_hold_across_a_restart(live: Live) -> None:
    build = live.submit(lab="lab2")
    waiting = live.submit(lab="lab2", depends=[build])
    rule = add_filter(live, action="pause", predicates=["owner=carol"])
    carol = live.submit("carol", lab="lab2")
    assert live.post("/queue/pause", {"lab": "lab1", "for_s": 3600}).status_code == 200
    in_lab1 = live.submit(lab="lab1")
    live.service.stop()
    settings = live.service.settings
    again = SchedulerService.elected(live.engine, settings, live.dispatcher, holder="again")
    again.start()
    live.service = again
    first_client = live.client
    live.client = TestClient(create_app(live.engine, settings, again))
    try:
        assert live.waits_for(waiting) == f"waits for job {build} to end (needs completed)"
        assert live.waits_for(carol) == f"paused by filter {rule}"
        assert not live.started(in_lab1)
        assert again.core is not None
        assert again.core.paused == {"lab1"}
        live.run(build)
        assert live.started(waiting)
        assert live.post("/queue/resume", {"lab": "lab1"}).status_code == 200
        assert live.started(in_lab1)
    finally:
        live.client.close()
        live.client = first_client
        again.stop()


# --- running limits --------------------------------------------------------------------


def test_the_global_running_limit_caps_started_sets(make_live: LiveFactory) -> None:
    live = make_live(running_limit=2)
    jobs = [live.submit(lab=None) for _ in range(4)]
    assert len(live.running()) == 2
    waiting = next(j for j in jobs if not live.started(j))
    assert live.waits_for(waiting) == "a running slot (2 of 2 sets running)"
    for _ in range(3):
        live.run(next(j for j in jobs if live.set_of(j) in live.running()))
        assert len(live.running()) <= 2
    assert all(live.started(j) for j in jobs)


def test_a_lab_running_limit_caps_that_lab_only(make_live: LiveFactory) -> None:
    live = make_live(lab_running_limits={"lab1": 1})
    lab1 = [live.submit(lab="lab1") for _ in range(2)]
    lab2 = [live.submit(lab="lab2") for _ in range(2)]
    assert [live.started(j) for j in lab1] == [True, False]
    assert all(live.started(j) for j in lab2)
    live.run(lab1[0])
    assert live.started(lab1[1])


# --- with real supervisors on the local backend ----------------------------------------


@pytest.fixture
def real(template: Path, tmp_path: Path) -> Iterator[tuple[TestClient, Engine, dict[str, str]]]:
    path = tmp_path / "labq.db"
    shutil.copyfile(template, path)
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    tokens = seed(engine)
    settings = Settings(
        data_dir=str(tmp_path / "data"),
        consistency_every=3600,
        heartbeat_every=0.5,
        queue=Queue(running_limit=1),
    )
    inbox = Inbox()  # the service's: the dispatcher posts supervisors' exits into it
    dispatcher = Dispatcher(url, settings, inbox.supervisor_exited, poll_every=0.1)
    service = SchedulerService.elected(engine, settings, dispatcher, holder="test", inbox=inbox)
    service.start()
    try:
        with TestClient(create_app(engine, settings, service)) as client:
            yield client, engine, tokens
    finally:
        dispatcher.shutdown()
        service.stop()
        engine.dispose()


def test_real_sets_run_one_at_a_time_and_after_their_dependency(
    real: tuple[TestClient, Engine, dict[str, str]],
) -> None:
    client, engine, tokens = real
    auth = {"Authorization": f"Bearer {tokens['alice']}"}

    def submit(**fields: Any) -> int:
        job = {"recipe_sets": [{"recipes": [{"tasks": QUICK}]}], "group": "kernel-qe", **fields}
        answer = client.post(f"{API}/jobs", json=job, headers=auth)
        assert answer.status_code == 201, answer.text
        job_id: int = answer.json()["id"]
        return job_id

    first = submit()
    second = submit()  # two free systems, but the running limit is 1
    third = submit(depends=[first])

    def ended() -> bool:
        states = [
            client.get(f"{API}/jobs/{j}", headers=auth).json()["state"]
            for j in (first, second, third)
        ]
        return all(s == "completed" for s in states)

    wait_until(ended, "the three jobs to complete", timeout=40)
    with reading(engine) as repo:
        spans = {j: repo.jobs.load_job(j).sets[0] for j in (first, second, third)}
    ordered = sorted(spans.values(), key=lambda s: s.started_at or T0)
    for before, after in itertools.pairwise(ordered):
        assert before.finished_at is not None
        assert after.started_at is not None
        assert after.started_at >= before.finished_at  # never two at once
    assert spans[third].started_at >= spans[first].finished_at  # type: ignore[operator]
