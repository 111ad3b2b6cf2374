"""Started sets, their supervisors and heartbeats; what the scheduler rebuilds from."""

from __future__ import annotations

import pytest

from labq.domain.priority import Priority
from labq.domain.requirements import parse
from labq.domain.states import RecipeState, Usage
from labq.errors import ConflictError, NotFoundError
from labq.store import Repository

from .conftest import ADMIN, at, job_spec, recipe_ids


def scheduled_set(repo: Repository, *systems: str) -> int:
    """A set with one recipe scheduled on each of ``systems``."""
    job_id = repo.submit_job(job_spec(len(systems)), owner="bob", now=at(1), source_format="x")
    (recipes,) = recipe_ids(repo, job_id)
    for recipe, system in zip(recipes, systems, strict=True):
        repo.move_recipe(recipe, RecipeState.SCHEDULED, now=at(2), system=system)
    return repo.load_job(job_id).sets[0].id


def test_a_set_starts_once_every_recipe_holds_a_system_of_the_lab(seeded: Repository) -> None:
    seeded.add_lab("lab2", actor=ADMIN, now=at(0))
    job_id = seeded.submit_job(job_spec(2), owner="bob", now=at(1), source_format="x")
    set_id = seeded.load_job(job_id).sets[0].id
    ((first, _),) = recipe_ids(seeded, job_id)
    seeded.move_recipe(first, RecipeState.SCHEDULED, now=at(2), system="s1.lab")
    with pytest.raises(ConflictError, match="not every recipe"):
        seeded.start_recipe_set(set_id, lab="lab1", now=at(3))
    set_id = scheduled_set(seeded, "s2.lab")
    with pytest.raises(ConflictError):
        seeded.start_recipe_set(set_id, lab="lab2", now=at(3))
    assert seeded.start_recipe_set(set_id, lab="lab1", now=at(3))
    assert not seeded.start_recipe_set(set_id, lab="lab1", now=at(4))  # a repeat
    view = seeded.get_recipe_set(set_id)
    assert (view.lab, view.started_at, view.finished_at) == ("lab1", at(3), None)
    assert seeded.unsupervised_sets() == [set_id]
    assert seeded.unsupervised_sets(lab="lab2") == []
    with pytest.raises(NotFoundError):
        seeded.start_recipe_set(set_id + 100, lab="lab1", now=at(4))


def test_supervisors_heartbeat_until_they_go_quiet(seeded: Repository) -> None:
    quiet, busy = scheduled_set(seeded, "s1.lab"), scheduled_set(seeded, "s2.lab")
    with pytest.raises(ConflictError, match="has not started"):
        seeded.record_supervisor(quiet, 4242, "host-a", now=at(3))
    for set_id in (quiet, busy):
        seeded.start_recipe_set(set_id, lab="lab1", now=at(3))
        seeded.record_supervisor(set_id, 4242 + set_id, "host-a", now=at(4))
    assert seeded.unsupervised_sets() == []
    assert seeded.heartbeat(busy, now=at(60))
    assert seeded.stale_supervisors(older_than=at(30)) == [quiet]
    assert seeded.stale_supervisors(older_than=at(4)) == []
    view = seeded.get_recipe_set(busy)
    assert (view.supervisor_pid, view.supervisor_host, view.heartbeat_at) == (
        4242 + busy,
        "host-a",
        at(60),
    )
    # A restarted dispatcher adopts the set with a new supervisor: the old one must stop.
    seeded.record_supervisor(busy, 99, "host-b", now=at(61))
    assert not seeded.heartbeat(busy, now=at(62), pid=4242 + busy)
    assert seeded.heartbeat(busy, now=at(62), pid=99)


def test_a_stop_request_and_the_end_of_a_set_stop_its_supervisor(seeded: Repository) -> None:
    set_id = scheduled_set(seeded, "s1.lab")
    with pytest.raises(ConflictError, match="cancel it instead"):
        seeded.request_stop(set_id, "cancelled by bob")
    seeded.start_recipe_set(set_id, lab="lab1", now=at(3))
    seeded.record_supervisor(set_id, 7, "h", now=at(3))
    assert seeded.request_stop(set_id, "cancelled by bob")
    assert not seeded.request_stop(set_id, "again")
    assert not seeded.heartbeat(set_id, now=at(4))
    assert seeded.get_recipe_set(set_id).stop_reason == "cancelled by bob"
    (recipe,) = (r.id for r in seeded.get_recipe_set(set_id).recipes)
    seeded.move_recipe(recipe, RecipeState.CANCELLED, now=at(5))
    assert seeded.get_recipe_set(set_id).finished_at == at(5)
    assert seeded.stale_supervisors(older_than=at(100)) == []
    assert not seeded.heartbeat(set_id, now=at(6))
    assert not seeded.request_stop(set_id, "late")
    with pytest.raises(ConflictError):
        seeded.record_supervisor(set_id, 8, "h", now=at(7))


def test_unfinished_sets_carry_what_the_scheduler_needs(seeded: Repository) -> None:
    spec = job_spec(2, group="kernel-qe")
    first = spec.recipe_sets[0]
    recipes = [
        first.recipes[0].model_copy(
            update={"exclude": ["s2.lab"], "host": parse({"arch": "x86_64"})}
        ),
        first.recipes[1].model_copy(update={"force": "s3.lab"}),
    ]
    spec = spec.model_copy(
        update={
            "recipe_sets": [
                first.model_copy(
                    update={
                        "recipes": recipes,
                        "priority": Priority.HIGH,
                        "max_time": 600,
                        "max_retries": 2,
                    }
                )
            ]
        }
    )
    job_id = seeded.submit_job(spec, owner="alice", now=at(1), source_format="native")
    ((a, b),) = recipe_ids(seeded, job_id)
    seeded.move_recipe(a, RecipeState.SCHEDULED, now=at(2), system="s1.lab")
    seeded.move_recipe(b, RecipeState.ASSIGNED, now=at(2))
    done = scheduled_set(seeded, "s2.lab")
    seeded.move_recipe(seeded.get_recipe_set(done).recipes[0].id, RecipeState.CANCELLED, now=at(3))
    (stored,) = seeded.unfinished_sets()
    assert (stored.job, stored.group, stored.priority, stored.submitted_at) == (
        job_id,
        "kernel-qe",
        Priority.HIGH,
        at(1),
    )
    assert (stored.max_time, stored.max_retries, stored.attempt, stored.retry_of) == (
        600,
        2,
        1,
        None,
    )
    assert (stored.lab, stored.started_at, stored.state) == (None, None, RecipeState.ASSIGNED)
    ra, rb = stored.recipes
    assert (ra.id, ra.state, ra.system, ra.excluded, ra.scheduled_at) == (
        a,
        RecipeState.SCHEDULED,
        "s1.lab",
        frozenset({"s2.lab"}),
        at(2),
    )
    assert ra.requirement == parse({"arch": "x86_64"})
    assert (rb.force, rb.system, rb.excluded) == ("s3.lab", None, frozenset())
    assert seeded.unfinished_sets(set_ids=[done]) == []
    assert [s.fqdn for s in seeded.systems_as_added()] == ["s1.lab", "s2.lab", "s3.lab"]


def test_pending_systems_are_the_free_ones_awaiting_the_event(seeded: Repository) -> None:
    # seed() leaves automated systems pending: nothing has run the event yet.
    assert seeded.pending_systems() == ["s1.lab", "s2.lab"]
    seeded.set_usage("s1.lab", Usage.IDLE, now=at(1))
    assert seeded.pending_systems() == ["s2.lab"]


def test_priority_changes_only_for_waiting_sets(seeded: Repository) -> None:
    job_id = seeded.submit_job(job_spec(1, 1), owner="bob", now=at(1), source_format="x")
    first, second = (s.id for s in seeded.load_job(job_id).sets)
    (recipe,) = (r.id for r in seeded.get_recipe_set(first).recipes)
    seeded.move_recipe(recipe, RecipeState.SCHEDULED, now=at(2), system="s1.lab")
    seeded.start_recipe_set(first, lab="lab1", now=at(2))
    assert seeded.change_priority(job_id, Priority.LOW, actor="bob", now=at(3)) == [second]
    assert seeded.change_priority(job_id, Priority.LOW, actor="bob", now=at(4)) == []
    sets = seeded.load_job(job_id).sets
    assert [s.spec.priority for s in sets] == [Priority.NORMAL, Priority.LOW]
    assert seeded.activity(kind="job")[0].new_value == "low"
    with pytest.raises(NotFoundError):
        seeded.change_priority(job_id + 100, Priority.LOW, actor="bob", now=at(5))
