"""The service learns run times from finished runs and forecasts the waiting sets from them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from labq.config import Settings
from labq.domain.events import JobSubmitted, SystemAdded
from labq.domain.model import System
from labq.domain.states import RecipeState
from labq.formats.native import validate_native
from labq.scheduler.entries import SchedulerConfig
from labq.service import bridge
from labq.service.inbox import SupervisorExited
from labq.service.loop import SchedulerService
from labq.store import database, epoch, reading, transaction
from tests.doubles import RecordingDispatcher

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def engine(tmp_path):
    url = f"sqlite:///{tmp_path / 'labq.db'}"
    database.upgrade(url)
    engine = database.make_engine(url)
    with transaction(engine) as repo:
        repo.systems.add_lab("lab1", actor="admin", now=T0)
        repo.people.add_user("alice", actor="admin", now=T0)
        repo.systems.add_system(System(fqdn="a", lab="lab1"), actor="admin", now=T0)
    yield engine
    engine.dispose()


@pytest.fixture
def lab(engine):
    clock = Clock()
    dispatcher = RecordingDispatcher()
    service = SchedulerService.elected(
        engine, Settings(consistency_every=3600), dispatcher, holder="test", clock=clock
    )
    service.start()
    service.post(SystemAdded("a"))
    try:
        yield engine, service, dispatcher, clock
    finally:
        service.stop()


def submit(engine, service, clock, task="boot", *, max_time=7200, metadata=None):
    recipe = {"tasks": [{"name": task}], "metadata": metadata or {}}
    spec = validate_native(
        {"recipe_sets": [{"max_time": max_time, "recipes": [recipe]}]}, source="t"
    )
    with transaction(engine) as repo:
        job_id = repo.queue.submit_job(spec, owner="alice", now=clock(), source_format="native")
        set_id = repo.jobs.load_job(job_id).sets[0].id
    service.post(JobSubmitted(job_id))
    service.drain()
    return set_id


def run(engine, service, dispatcher, clock, set_id, seconds, final=RecipeState.COMPLETED):
    """The started set runs for ``seconds`` and ends ``final``; its supervisor exits."""
    assert set_id in dispatcher.started
    clock.now += timedelta(seconds=seconds)
    with transaction(engine) as repo:
        for recipe in repo.jobs.get_recipe_set(set_id).recipes:
            for state in (RecipeState.WAITING, RecipeState.INSTALLING, RecipeState.RUNNING, final):
                repo.moves.move_recipe(recipe.id, state, now=clock())
    service.post(SupervisorExited(set_id, 0, dispatcher.claims[set_id]))
    service.drain()


def test_a_second_run_of_the_same_job_is_predicted_from_the_first(lab):
    engine, service, dispatcher, clock = lab
    first = submit(engine, service, clock)
    (shown,) = service.forecasts().values()
    assert (shown.set_id, shown.running, shown.basis, shown.runs) == (first, True, "max_time", 0)
    run(engine, service, dispatcher, clock, first, 600)
    with reading(engine) as repo:
        (record,) = repo.history.recent(10)
    assert (record.set_id, record.seconds, record.outcome) == (first, 600, "completed")

    second = submit(engine, service, clock)  # starts at once: the system is free
    third = submit(engine, service, clock)  # waits for it
    assert service.core is not None
    assert service.core.sets[second].predicted == 600
    forecasts = service.forecasts()
    running, waiting = forecasts[second], forecasts[third]
    assert (running.running, running.basis, running.runs, running.median) == (
        True,
        "source",
        1,
        600,
    )
    assert running.end == epoch(clock()) + 600
    assert not waiting.running
    assert waiting.start is not None
    assert waiting.start >= epoch(clock())
    assert waiting.end == waiting.start + 600
    assert (waiting.seconds, waiting.basis) == (600, "source")


def test_aborted_runs_are_recorded_but_not_learned(lab):
    engine, service, dispatcher, clock = lab
    first = submit(engine, service, clock, task="flaky")
    run(engine, service, dispatcher, clock, first, 30, final=RecipeState.ABORTED)
    with reading(engine) as repo:
        (record,) = repo.history.recent(10, completed_only=False)
    assert record.outcome == "aborted"
    second = submit(engine, service, clock, task="flaky")
    assert service.forecasts()[second].basis == "max_time"
    assert service.forecasts()[second].seconds == 7200


def test_a_rebuilt_scheduler_keeps_the_predictions(lab):
    engine, service, dispatcher, clock = lab
    first = submit(engine, service, clock)
    run(engine, service, dispatcher, clock, first, 900)
    second = submit(engine, service, clock)
    service._rebuild(catch_up=False)
    assert service.core is not None
    assert service.core.sets[second].predicted == 900
    assert service.forecasts()[second].basis == "source"


def test_what_a_reservesys_may_keep_reaches_the_core_and_survives_a_restart(engine, lab):
    """The core plans a set's systems busy for what its <reservesys> may keep after it, so
    it must learn that from the stored recipe, at submission and when rebuilt."""
    _, service, dispatcher, clock = lab
    keeps = {"reservesys": {"duration": 5400, "when": "onfail"}}
    set_id = submit(engine, service, clock, "b", max_time=600, metadata=keeps)
    assert set_id in dispatcher.started
    assert service.core is not None
    assert service.core.sets[set_id].kept == 5400
    with reading(engine) as repo:
        rebuilt = bridge.rebuild(repo, SchedulerConfig())
    assert rebuilt.sets[set_id].kept == 5400
    assert rebuilt.declared_ends() == {"a": epoch(T0) + 600 + 5400}  # its run, then kept
