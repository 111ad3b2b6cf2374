"""``/metrics`` through a real client: it parses, and its figures agree with the API's."""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine

from labq.config import Settings
from labq.domain.states import RecipeState, Result
from labq.service.loop import SchedulerService
from labq.store import make_engine, transaction
from labq.webapp import create_app

from .conftest import API, Clock, Lab, RecordingDispatcher, TestClient, play_set, seed

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(client: TestClient, token: str) -> Samples:
    """Every sample of one scrape, by name and labels; the text must parse."""
    answer = client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            key = (sample.name, frozenset(sample.labels.items()))
            assert key not in samples, f"{key} twice"
            samples[key] = sample.value
    return samples


def only(samples: Samples, name: str, *labels: str) -> Counter[tuple[str, ...]]:
    """The non-zero samples of one metric, keyed by the values of ``labels``."""
    out: Counter[tuple[str, ...]] = Counter()
    for (sample, found), value in samples.items():
        if sample == name and value:
            named = dict(found)
            out[tuple(named[label] for label in labels)] += int(value)
    return out


def systems_of(client: TestClient, token: str) -> Counter[tuple[str, ...]]:
    listed = client.get(f"{API}/systems", headers={"Authorization": f"Bearer {token}"}).json()
    return Counter((s["lab"], s["condition"], s["usage"]) for s in listed["systems"])


def queue_of(client: TestClient, token: str) -> Counter[tuple[str, ...]]:
    rows = client.get(f"{API}/queue", headers={"Authorization": f"Bearer {token}"}).json()
    return Counter((r["lab"] or "", r["nominal"]) for r in rows["queue"])


def test_a_scrape_needs_a_token(lab: Lab) -> None:
    missing = lab.client.get("/metrics")
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    wrong = lab.client.get("/metrics", headers={"Authorization": "Bearer lq_nope"})
    assert wrong.status_code == 401
    assert lab.client.get(f"{API}/metrics", headers=lab.auth("alice")).status_code == 404


def test_systems_agree_with_the_systems_listing(lab: Lab) -> None:
    assert lab.post("/labs", json={"name": "lab2"}).status_code == 201
    added = lab.post("/systems", json={"fqdn": "s3.lab2", "lab": "lab2", "condition": "broken"})
    assert added.status_code == 201
    broken = lab.post("/systems/s2.lab/condition", json={"condition": "manual"})
    assert broken.status_code == 200
    samples = scrape(lab.client, lab.tokens["bob"])
    assert only(samples, "labq_systems", "lab", "condition", "usage") == systems_of(
        lab.client, lab.tokens["bob"]
    )
    # every combination is there, zeros included, so series do not come and go
    labq_systems = [key for key in samples if key[0] == "labq_systems"]
    assert len(labq_systems) == 2 * 4 * 6
    broken_idle = frozenset({("lab", "lab2"), ("condition", "broken"), ("usage", "idle")})
    assert samples["labq_systems", broken_idle] == 1


def test_an_unscheduled_job_counts_as_queued_in_no_lab(lab: Lab) -> None:
    job = lab.client.post(
        f"{API}/jobs",
        json={
            "group": "kernel-qe",  # may use both systems
            "recipe_sets": [{"priority": "low", "recipes": [{}, {}]}, {"recipes": [{}]}],
        },
        headers=lab.auth("alice"),
    )
    assert job.status_code == 201, job.text
    samples = scrape(lab.client, lab.tokens["alice"])
    assert only(samples, "labq_queue_length", "lab", "priority") == {
        ("", "low"): 1,
        ("", "normal"): 1,
    }
    assert samples["labq_recipe_sets_started_total", frozenset()] == 0
    assert samples["labq_recipe_sets_retried_total", frozenset()] == 0


# --- with the real scheduler service --------------------------------------------------


@dataclass
class Live:
    """The API over a running scheduler service."""

    client: TestClient
    engine: Engine
    service: SchedulerService
    dispatcher: RecordingDispatcher
    clock: Clock
    tokens: dict[str, str]

    def auth(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    def submit(self, recipe_set: dict[str, Any], **fields: Any) -> int:
        answer = self.client.post(
            f"{API}/jobs", json={"recipe_sets": [recipe_set], **fields}, headers=self.auth("alice")
        )
        assert answer.status_code == 201, answer.text
        self.service.drain()
        job_id: int = answer.json()["id"]
        return job_id

    def run(self, set_id: int, final: RecipeState) -> None:
        """The set's supervisor moves every recipe to ``final`` and exits."""
        code = 0 if final is RecipeState.COMPLETED else 1
        play_set(self.engine, self.service, set_id, final, now=self.clock(), code=code)

    def sets(self) -> list[dict[str, Any]]:
        jobs = self.client.get(f"{API}/jobs", headers=self.auth("bob")).json()["jobs"]
        return [
            rset
            for job in jobs
            for rset in self.client.get(f"{API}/jobs/{job['id']}", headers=self.auth("bob")).json()[
                "sets"
            ]
        ]

    def agrees(self) -> Samples:
        """Scrape, and check every figure against what the API says now."""
        samples = scrape(self.client, self.tokens["bob"])
        queue = only(samples, "labq_queue_length", "lab", "priority")
        assert queue == queue_of(self.client, self.tokens["bob"])
        systems = only(samples, "labq_systems", "lab", "condition", "usage")
        assert systems == systems_of(self.client, self.tokens["bob"])
        sets = self.sets()
        started = sum(1 for s in sets if s["started_at"] is not None)
        assert samples["labq_recipe_sets_started_total", frozenset()] == started
        ended = Counter(s["state"] for s in sets if s["finished_at"] is not None)
        for outcome in ("completed", "aborted", "cancelled"):
            value = samples["labq_recipe_sets_finished_total", frozenset({("outcome", outcome)})]
            assert value == ended[outcome], outcome
        retried = sum(1 for s in sets if s["retry_of"] is not None)
        assert samples["labq_recipe_sets_retried_total", frozenset()] == retried
        decisions = sum(
            value
            for (name, _), value in samples.items()
            if name == "labq_scheduling_decision_seconds_count"
        )
        assert decisions >= self.service.handled  # the histogram is the process's
        return samples


@pytest.fixture
def live(template: Path, tmp_path: Path) -> Iterator[Live]:
    path = tmp_path / "labq.db"
    shutil.copyfile(template, path)
    engine = make_engine(f"sqlite:///{path}")
    tokens = seed(engine)
    clock = Clock()
    # no consistency pass while the test moves the clock: every event comes from the test
    settings = Settings(data_dir=str(tmp_path / "data"), consistency_every=30 * 86400)
    dispatcher = RecordingDispatcher()
    service = SchedulerService.elected(engine, settings, dispatcher, holder="test", clock=clock)
    service.start()
    app = create_app(engine, settings, service, clock=clock)
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            yield Live(client, engine, service, dispatcher, clock, tokens)
    finally:
        service.stop()
        engine.dispose()


def test_figures_agree_with_the_api_as_jobs_run(live: Live) -> None:
    first = live.submit({"recipes": [{}]}, group="kernel-qe")
    (running,) = live.dispatcher.started
    # two recipes, one system left: it holds that one in lab1 and waits for the other
    pair = {"priority": "high", "max_retries": 1, "recipes": [{}, {}]}
    held = live.submit(pair, group="kernel-qe")
    # no group: pool perf is closed to it, and s2 is held
    waiting = live.submit({"priority": "low", "recipes": [{}]})
    samples = live.agrees()
    assert only(samples, "labq_queue_length", "lab", "priority") == {
        ("lab1", "high"): 1,
        ("", "low"): 1,
    }

    live.clock.advance(2 * 3600)  # aging: low waited two levels up, to normal
    assert ("", "normal") in only(live.agrees(), "labq_queue_length", "lab", "priority")

    live.run(running, RecipeState.COMPLETED)  # its system goes to the set that held
    assert len(live.dispatcher.started) == 2
    live.agrees()

    live.run(live.dispatcher.started[1], RecipeState.ABORTED)  # retried once
    live.agrees()
    cancel = live.client.post(f"{API}/jobs/{waiting}/cancel", headers=live.auth("alice"))
    assert cancel.status_code == 200, cancel.text
    live.service.drain()
    # it had started on the system the retry left: its supervisor is asked to stop
    (stopping,) = live.client.get(f"{API}/jobs/{waiting}", headers=live.auth("bob")).json()["sets"]
    assert (stopping["state"], stopping["stop_reason"]) == ("scheduled", "cancelled")
    assert live.dispatcher.stopped == [stopping["id"]]
    live.agrees()
    live.run(stopping["id"], RecipeState.CANCELLED)  # and it stops
    samples = live.agrees()
    assert samples["labq_recipe_sets_finished_total", frozenset({("outcome", "completed")})] == 1
    assert samples["labq_recipe_sets_finished_total", frozenset({("outcome", "aborted")})] == 1
    assert samples["labq_recipe_sets_finished_total", frozenset({("outcome", "cancelled")})] == 1
    assert samples["labq_recipe_sets_retried_total", frozenset()] == 1
    assert {first, held, waiting} == {1, 2, 3}


def test_lock_figures_agree_with_the_lock_listing(live: Live) -> None:
    first = live.submit({"recipes": [{}]}, group="kernel-qe")
    second = live.submit({"recipes": [{}]}, group="kernel-qe")
    a, b = live.dispatcher.started
    nfs = [{"level": "storage", "name": "nfs1", "exclusive": True}]
    took = live.client.post(
        f"{API}/locks/acquire", json={"locks": nfs, "set": a}, headers=live.auth("root")
    )
    assert took.status_code == 200, took.text
    waits = live.client.post(
        f"{API}/locks/acquire", json={"locks": nfs, "set": b}, headers=live.auth("root")
    )
    assert waits.status_code == 202, waits.text
    assert f"set {a} holds storage:nfs1 (exclusive)" in waits.json()["waiting_on"][0]
    listed = live.client.get(f"{API}/locks", headers=live.auth("bob")).json()
    samples = scrape(live.client, live.tokens["bob"])
    held = Counter(
        (h["level"], "exclusive" if h["exclusive"] else "shared") for h in listed["held"]
    )
    assert only(samples, "labq_locks_held", "level", "mode") == held
    assert held[("storage", "exclusive")] == 1
    waiting = Counter((lvl,) for w in listed["waiting"] for lvl in {g["level"] for g in w["locks"]})
    assert only(samples, "labq_lock_waits", "level") == waiting
    assert waiting[("storage",)] == 1
    refused = live.client.post(
        f"{API}/locks/acquire", json={"locks": nfs, "set": b}, headers=live.auth("alice")
    )
    assert refused.status_code == 403  # a user's token takes no locks for a set
    assert {first, second} == {1, 2}


def test_usage_adds_up_system_hours_jobs_pass_rate_and_wait_per_row(live: Live) -> None:
    start = live.clock()
    ours = live.submit({"recipes": [{}]}, group="kernel-qe")
    theirs = live.submit({"recipes": [{}]})
    assert len(live.dispatcher.started) == 2
    live.clock.advance(7200)
    for set_id, result, final in zip(
        live.dispatcher.started,
        (Result.PASS, Result.FAIL),
        (RecipeState.COMPLETED, RecipeState.COMPLETED),
        strict=True,
    ):
        with transaction(live.engine) as repo:
            for recipe in repo.jobs.get_recipe_set(set_id).recipes:
                repo.reports.set_recipe_result(recipe.id, result)
        live.run(set_id, final)
    window = {"since": start.isoformat(), "until": (start + timedelta(hours=3)).isoformat()}

    def usage(by: str) -> dict[str, dict[str, Any]]:
        answer = live.client.get(
            f"{API}/usage", params={"by": by, **window}, headers=live.auth("bob")
        )
        assert answer.status_code == 200, answer.text
        return {row["key"]: row for row in answer.json()["rows"]}

    groups = usage("group")
    assert set(groups) == {"kernel-qe", "(no group)"}
    assert groups["kernel-qe"]["system_hours"] == pytest.approx(2.0)
    assert groups["kernel-qe"]["pass_rate"] == 1.0
    assert groups["(no group)"]["pass_rate"] == 0.0
    assert groups["kernel-qe"]["mean_wait_s"] == 0.0
    users = usage("user")
    assert users["alice"]["system_hours"] == pytest.approx(4.0)
    assert (users["alice"]["jobs"], users["alice"]["recipes"]) == (2, 2)
    assert users["alice"]["pass_rate"] == 0.5
    assert usage("lab")["lab1"]["system_hours"] == pytest.approx(4.0)
    pools = usage("pool")  # s1 is in perf, s2 in no pool
    assert {k: round(v["system_hours"], 3) for k, v in pools.items()} == {
        "perf": 2.0,
        "(no pool)": 2.0,
    }
    # a window that ends before anything ran says so; a bad one is refused in one line
    before = {"since": (start - timedelta(hours=2)).isoformat(), "until": start.isoformat()}
    empty = live.client.get(f"{API}/usage", params=before, headers=live.auth("bob"))
    assert empty.json()["rows"] == []
    backwards = {"since": window["until"], "until": window["since"]}
    refused = live.client.get(f"{API}/usage", params=backwards, headers=live.auth("bob"))
    assert refused.status_code == 422
    assert refused.json()["error"]["place"] == "since"
    assert (
        live.client.get(
            f"{API}/usage", params={"by": "planet"}, headers=live.auth("bob")
        ).status_code
        == 422
    )
    assert live.client.get(f"{API}/usage").status_code == 401
    assert ours != theirs
