"""A deposed leader acts on nothing; the consistency pass repairs what the scheduler missed."""

from __future__ import annotations

import logging
import threading

import pytest

from labq.config import Settings
from labq.domain.events import JobSubmitted
from labq.domain.states import RecipeState
from labq.formats.native import validate_native
from labq.service.inbox import ConsistencyDue
from labq.service.loop import SchedulerService
from labq.store import transaction
from tests.doubles import RecordingDispatcher
from tests.service.test_loop import NOW, add_systems, engine, submit

__all__ = ["engine"]


def elected(engine, dispatcher, holder, on_deposed=None):
    settings = Settings(consistency_every=3600)
    service = SchedulerService.elected(
        engine, settings, dispatcher, holder=holder, clock=lambda: NOW, on_deposed=on_deposed
    )
    service.start()
    return service


def test_a_deposed_leader_commits_and_dispatches_nothing(engine):
    told = threading.Event()
    old_dispatcher, new_dispatcher = RecordingDispatcher(), RecordingDispatcher()
    old = elected(engine, old_dispatcher, "old", on_deposed=told.set)
    add_systems(engine, old, "a", "b")
    new = elected(engine, new_dispatcher, "new")  # took the next epoch: the old is deposed
    job_id = submit(engine, old, recipes=1)  # the old leader hears of it first
    assert told.wait(5), "the server was told to step down"
    assert old.deposed.is_set()
    assert old_dispatcher.started == []
    with transaction(engine) as repo:
        (rs,) = repo.jobs.load_job(job_id).sets
        assert {r.state for r in rs.recipes} == {RecipeState.NEW}, "nothing was committed"
    new.post(JobSubmitted(job_id))
    new.drain()
    assert new_dispatcher.started == [rs.id]
    old.stop()
    new.stop()


def test_the_consistency_pass_repairs_a_set_the_scheduler_does_not_know(
    engine, caplog: pytest.LogCaptureFixture
):
    dispatcher = RecordingDispatcher()
    service = elected(engine, dispatcher, "leader")
    add_systems(engine, service, "a")
    spec = validate_native({"recipe_sets": [{"recipes": [{}]}]}, source="t")
    with transaction(engine) as repo:  # queued by a leader that was deposed right after
        job_id = repo.queue.submit_job(spec, owner="alice", now=NOW, source_format="native")
        (rs,) = repo.jobs.load_job(job_id).sets
        repo.moves.move_recipe(rs.recipes[0].id, RecipeState.QUEUED, now=NOW)
    with caplog.at_level(logging.WARNING, logger="labq.scheduler"):
        service.post(ConsistencyDue())
        service.drain()
    assert dispatcher.started == [rs.id]
    assert f"set {rs.id} is unfinished in the database, unknown to the scheduler" in caplog.text
    service.stop()
