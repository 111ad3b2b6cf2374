"""The scheduler service: events in, decisions committed, then the dispatcher acts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from labq.config import Health, Settings
from labq.domain.events import ConditionChanged, JobsCancelled, JobSubmitted, SystemAdded
from labq.domain.model import System
from labq.domain.states import Condition, RecipeState, Usage
from labq.formats.native import validate_native
from labq.service.inbox import ConsistencyDue, SupervisorExited
from labq.service.loop import SchedulerService
from labq.store import database, transaction
from tests.doubles import RecordingDispatcher

__all__ = ["RecordingDispatcher"]

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


@pytest.fixture
def engine(tmp_path):
    url = f"sqlite:///{tmp_path / 'labq.db'}"
    database.upgrade(url)
    engine = database.make_engine(url)
    with transaction(engine) as repo:
        repo.systems.add_lab("lab1", actor="admin", now=NOW)
        repo.people.add_user("alice", actor="admin", now=NOW)
    yield engine
    engine.dispose()


def make_service(engine, dispatcher, **health):
    settings = Settings(health=Health(**health), consistency_every=3600)
    service = SchedulerService.elected(
        engine, settings, dispatcher, holder="test", clock=lambda: NOW
    )
    service.start()
    return service


def add_systems(engine, service, *names):
    with transaction(engine) as repo:
        for name in names:
            repo.systems.add_system(System(fqdn=name, lab="lab1"), actor="admin", now=NOW)
    for name in names:
        service.post(SystemAdded(name))


def submit(engine, service, recipes=2, max_retries=0):
    spec = validate_native(
        {"recipe_sets": [{"max_retries": max_retries, "recipes": [{}] * recipes}]}, source="t"
    )
    with transaction(engine) as repo:
        job_id = repo.queue.submit_job(spec, owner="alice", now=NOW, source_format="native")
    service.post(JobSubmitted(job_id))
    service.drain()
    return job_id


def run_to(engine, set_id, final):
    with transaction(engine) as repo:
        for recipe in repo.jobs.get_recipe_set(set_id).recipes:
            for state in (RecipeState.WAITING, RecipeState.INSTALLING, RecipeState.RUNNING, final):
                repo.moves.move_recipe(recipe.id, state, now=NOW)


def test_a_submitted_job_is_scheduled_committed_then_dispatched(engine):
    dispatcher = RecordingDispatcher()
    service = make_service(engine, dispatcher)
    add_systems(engine, service, "a", "b")
    job_id = submit(engine, service)
    with transaction(engine) as repo:
        job = repo.jobs.load_job(job_id)
        (rs,) = job.sets
        assert {r.state for r in rs.recipes} == {RecipeState.SCHEDULED}
        assert dispatcher.started == [rs.id]
    run_to(engine, rs.id, RecipeState.COMPLETED)
    service.post(SupervisorExited(rs.id, 0, dispatcher.claims[rs.id]))
    service.drain()
    with transaction(engine) as repo:
        assert {repo.systems.get_system(f).usage for f in ("a", "b")} == {Usage.IDLE}
    assert service.core is not None
    assert service.core.sets[rs.id].finished
    service.stop()


def test_a_dead_supervisor_aborts_its_recipes_and_the_set_is_retried(engine):
    dispatcher = RecordingDispatcher()
    service = make_service(engine, dispatcher)
    add_systems(engine, service, "a", "b")
    job_id = submit(engine, service, recipes=1, max_retries=1)
    first = dispatcher.started[0]
    # killed before it moved anything
    service.post(SupervisorExited(first, -9, dispatcher.claims[first]))
    service.drain()
    with transaction(engine) as repo:
        sets = repo.jobs.load_job(job_id).sets
        assert sets[0].recipes[0].state is RecipeState.ABORTED
        why = repo.moves.recipe_history(sets[0].recipes[0].id)[-1].reason
        assert why == "the supervisor was killed (by SIGKILL) before the recipe ended"
        assert len(sets) == 2
        assert sets[1].retry_of == first
        ran_on = sets[0].recipes[0].system
        retried_on = sets[1].recipes[0].system
        assert retried_on is not None
        assert retried_on != ran_on
    assert dispatcher.started == [first, sets[1].id]
    service.stop()


def test_a_system_that_keeps_aborting_is_marked_broken(engine):
    dispatcher = RecordingDispatcher()
    service = make_service(engine, dispatcher, max_consecutive_aborts=2)
    add_systems(engine, service, "a")
    for _ in range(2):
        submit(engine, service, recipes=1)
        set_id = dispatcher.started[-1]
        run_to(engine, set_id, RecipeState.ABORTED)
        service.post(SupervisorExited(set_id, 0, dispatcher.claims[set_id]))
        service.drain()
    with transaction(engine) as repo:
        system = repo.systems.get_system("a")
        assert system.condition is Condition.BROKEN
        assert "aborted 2 recipe sets in a row" in (repo.systems.condition_reason("a") or "")
    service.stop()


def test_a_restarted_service_carries_on_from_the_database(engine):
    dispatcher = RecordingDispatcher()
    service = make_service(engine, dispatcher)
    add_systems(engine, service, "a")
    submit(engine, service, recipes=1)
    waiting_job = submit(engine, service, recipes=1)
    service.stop()
    first = dispatcher.started[0]
    run_to(engine, first, RecipeState.COMPLETED)

    again = RecordingDispatcher()
    service = make_service(engine, again)
    service.post(SupervisorExited(first, 0, dispatcher.claims[first]))
    service.drain()
    with transaction(engine) as repo:
        (rs,) = repo.jobs.load_job(waiting_job).sets
        assert again.started == [rs.id]  # nothing lost, nothing started twice
    service.stop()


def test_a_change_stamped_by_a_clock_ahead_of_the_schedulers_needs_no_rebuild(engine, caplog):
    dispatcher = RecordingDispatcher()
    service = make_service(engine, dispatcher)
    add_systems(engine, service, "a")
    with transaction(engine) as repo:  # the API's clock is a little ahead of the scheduler's
        repo.systems.set_condition(
            "a", Condition.BROKEN, now=NOW + timedelta(milliseconds=1), actor="t"
        )
    service.post(ConditionChanged("a"))
    job_id = submit(engine, service, recipes=1)
    with transaction(engine) as repo:
        repo.systems.set_condition(
            "a", Condition.AUTOMATED, now=NOW + timedelta(milliseconds=2), actor="t"
        )
    service.post(ConditionChanged("a"))
    service.drain()
    with transaction(engine) as repo:
        (rs,) = repo.jobs.load_job(job_id).sets
        assert rs.recipes[0].state is RecipeState.SCHEDULED
        rows = repo.systems.usage_history("a")
    assert dispatcher.started == [rs.id]
    assert [r.end for r in rows[:-1]] == [r.start for r in rows[1:]]
    assert "rebuilding" not in caplog.text
    service.stop()


def test_a_cancelled_set_whose_supervisor_died_ends_cancelled_and_is_not_retried(engine):
    dispatcher = RecordingDispatcher()
    service = make_service(engine, dispatcher)
    add_systems(engine, service, "a", "b")
    job_id = submit(engine, service, recipes=1, max_retries=1)
    (set_id,) = dispatcher.started
    with transaction(engine) as repo:
        assert repo.queue.cancel_job(job_id, actor="alice", now=NOW, reason="wrong kernel") == 1
    service.post(JobsCancelled(job_id))
    service.drain()
    assert dispatcher.stopped == [set_id]
    # killed before it ended anything
    service.post(SupervisorExited(set_id, -9, dispatcher.claims[set_id]))
    service.drain()
    with transaction(engine) as repo:
        (rs,) = repo.jobs.load_job(job_id).sets
        (recipe,) = rs.recipes
        assert recipe.state is RecipeState.CANCELLED
        assert repo.moves.recipe_history(recipe.id)[-1].reason == "wrong kernel"
        assert {repo.systems.get_system(f).recipe for f in ("a", "b")} == {None}
    service.stop()


def test_a_retry_owed_by_a_set_that_ended_unheard_is_made_after_a_restart(engine):
    """The supervisor wrote the abort, then the server died before it heard the set end."""
    dispatcher = RecordingDispatcher()
    service = make_service(engine, dispatcher)
    add_systems(engine, service, "a", "b")
    job_id = submit(engine, service, recipes=1, max_retries=1)
    (first,) = dispatcher.started
    service.stop()  # gone before the supervisor's exit is reported
    run_to(engine, first, RecipeState.ABORTED)
    again = RecordingDispatcher()
    service = make_service(engine, again)
    with transaction(engine) as repo:
        sets = repo.jobs.load_job(job_id).sets
        assert [s.retry_of for s in sets] == [None, first], "the retry was made"
        assert sets[1].recipes[0].system not in (None, sets[0].recipes[0].system)
        assert repo.jobs.job_state(job_id) is not RecipeState.ABORTED
    assert again.started == [sets[1].id]
    service.post(ConsistencyDue())  # told again: nothing more happens
    service.drain()
    with transaction(engine) as repo:
        assert len(repo.jobs.load_job(job_id).sets) == 2
    service.stop()


def test_a_cancel_between_a_sets_abort_and_its_end_being_heard_stops_the_retry(engine):
    dispatcher = RecordingDispatcher()
    service = make_service(engine, dispatcher)
    add_systems(engine, service, "a", "b")
    job_id = submit(engine, service, recipes=1, max_retries=1)
    (first,) = dispatcher.started
    run_to(engine, first, RecipeState.ABORTED)  # the supervisor wrote the abort...
    with transaction(engine) as repo:  # ...and the owner cancels before the server hears it
        repo.queue.cancel_job(job_id, actor="alice", now=NOW, reason="wrong kernel")
    service.post(SupervisorExited(first, 0, dispatcher.claims[first]))
    service.drain()
    with transaction(engine) as repo:
        (only,) = repo.jobs.load_job(job_id).sets
        assert only.error == "not re-scheduled: the job was cancelled (wrong kernel)"
        assert repo.jobs.job_state(job_id).is_final
    assert dispatcher.started == [first]
    service.stop()


def test_an_event_that_meets_a_cancel_it_has_not_heard_of_rebuilds_without_alarm(engine, caplog):
    # the API commits a cancel, then tells the scheduler; an event in between places the set
    dispatcher = RecordingDispatcher()
    service = make_service(engine, dispatcher)
    job_id = submit(engine, service, recipes=1)
    with transaction(engine) as repo:
        assert repo.queue.cancel_job(job_id, actor="alice", now=NOW, reason="changed my mind") == 1
    add_systems(engine, service, "a")  # offered to the set the core still thinks is queued
    service.drain()
    assert dispatcher.started == []
    assert "met a change" in caplog.text
    assert "Traceback" not in caplog.text
    later = submit(engine, service, recipes=1)  # the rebuilt core schedules on
    with transaction(engine) as repo:
        (rs,) = repo.jobs.load_job(later).sets
    assert dispatcher.started == [rs.id]
    service.stop()
