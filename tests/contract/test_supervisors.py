"""Started sets, their supervisors and heartbeats; what the scheduler rebuilds from."""

from __future__ import annotations

import pytest

from labq.domain.priority import Priority
from labq.domain.requirements import parse
from labq.domain.states import RecipeState, Usage
from labq.errors import ClaimLost, ConflictError, NotFoundError
from labq.store import Repository
from labq.store.supervisors import Beat, Supervised

from .conftest import ADMIN, at, job_spec, recipe_ids


def scheduled_set(repo: Repository, *systems: str) -> int:
    """A set with one recipe scheduled on each of ``systems``."""
    job_id = repo.queue.submit_job(
        job_spec(len(systems)), owner="bob", now=at(1), source_format="x"
    )
    (recipes,) = recipe_ids(repo, job_id)
    for recipe, system in zip(recipes, systems, strict=True):
        repo.moves.move_recipe(recipe, RecipeState.SCHEDULED, now=at(2), system=system)
    return repo.jobs.load_job(job_id).sets[0].id


def test_a_set_starts_once_every_recipe_holds_a_system_of_the_lab(seeded: Repository) -> None:
    seeded.systems.add_lab("lab2", actor=ADMIN, now=at(0))
    job_id = seeded.queue.submit_job(job_spec(2), owner="bob", now=at(1), source_format="x")
    set_id = seeded.jobs.load_job(job_id).sets[0].id
    ((first, _),) = recipe_ids(seeded, job_id)
    seeded.moves.move_recipe(first, RecipeState.SCHEDULED, now=at(2), system="s1.lab")
    with pytest.raises(ConflictError, match="not every recipe"):
        seeded.supervisors.start_recipe_set(set_id, lab="lab1", now=at(3))
    set_id = scheduled_set(seeded, "s2.lab")
    with pytest.raises(ConflictError):
        seeded.supervisors.start_recipe_set(set_id, lab="lab2", now=at(3))
    assert seeded.supervisors.start_recipe_set(set_id, lab="lab1", now=at(3))
    assert not seeded.supervisors.start_recipe_set(set_id, lab="lab1", now=at(4))  # a repeat
    view = seeded.jobs.get_recipe_set(set_id)
    assert (view.lab, view.started_at, view.finished_at) == ("lab1", at(3), None)
    assert seeded.supervisors.unsupervised_sets() == [(set_id, None)]
    assert seeded.supervisors.unsupervised_sets(lab="lab2") == []
    with pytest.raises(NotFoundError):
        seeded.supervisors.start_recipe_set(set_id + 100, lab="lab1", now=at(4))


def taken_up(repo: Repository, set_id: int, pid: int, *, now: float, host: str = "host-a") -> str:
    """Start the set under a claim and let a supervisor take it up; the claim."""
    claim = f"claim-{set_id}-{pid}"
    repo.supervisors.start_recipe_set(set_id, lab="lab1", now=at(now), claim=claim)
    repo.supervisors.confirm_claim(set_id, claim, pid, host, now=at(now + 1))
    return claim


def test_supervisors_heartbeat_until_they_go_quiet(seeded: Repository) -> None:
    quiet, busy = scheduled_set(seeded, "s1.lab"), scheduled_set(seeded, "s2.lab")
    with pytest.raises(ClaimLost):
        seeded.supervisors.confirm_claim(quiet, "nobody's", 4242, "host-a", now=at(3))
    claims = {s: taken_up(seeded, s, 4242 + s, now=3) for s in (quiet, busy)}
    assert seeded.supervisors.unsupervised_sets() == []
    assert seeded.supervisors.heartbeat(busy, now=at(60), claim=claims[busy]) is Beat.CARRY_ON
    assert seeded.supervisors.stale_supervisors(older_than=at(30)) == [quiet]
    assert seeded.supervisors.stale_supervisors(older_than=at(4)) == []
    view = seeded.jobs.get_recipe_set(busy)
    assert (view.supervisor_pid, view.supervisor_host, view.heartbeat_at) == (
        4242 + busy,
        "host-a",
        at(60),
    )
    assert seeded.supervisors.supervised_sets() == [
        Supervised(quiet, claims[quiet], 4242 + quiet, "host-a"),
        Supervised(busy, claims[busy], 4242 + busy, "host-a"),
    ]
    # a claim that is not the set's is told it has lost it
    assert seeded.supervisors.heartbeat(busy, now=at(62), claim="another") is Beat.LOST
    with pytest.raises(ClaimLost, match="another supervisor holds it"):
        seeded.supervisors.guard_claim(busy, "another")
    seeded.supervisors.guard_claim(busy, claims[busy])


def test_exactly_one_supervisor_takes_a_claim_up(seeded: Repository) -> None:
    set_id = scheduled_set(seeded, "s1.lab")
    assert not seeded.supervisors.claim_set(
        set_id, "early", now=at(2)
    )  # not started: nothing to claim
    seeded.supervisors.start_recipe_set(set_id, lab="lab1", now=at(3))
    assert seeded.supervisors.unsupervised_sets() == [(set_id, None)]
    assert seeded.supervisors.claim_set(set_id, "first", now=at(4))
    assert not seeded.supervisors.claim_set(set_id, "second", now=at(4))  # claimed already
    assert seeded.supervisors.unsupervised_sets() == [(set_id, "first")]
    assert seeded.supervisors.unsupervised_sets(claimed_before=at(4)) == []  # on its way
    assert seeded.supervisors.unsupervised_sets(claimed_before=at(5)) == [(set_id, "first")]
    # a new leader gives the set a fresh claim: the first launch is void
    assert not seeded.supervisors.claim_set(set_id, "third", now=at(5), replacing="second")
    assert seeded.supervisors.claim_set(set_id, "third", now=at(5), replacing="first")
    with pytest.raises(ClaimLost, match="another supervisor holds it"):
        seeded.supervisors.confirm_claim(set_id, "first", 11, "h", now=at(6))
    seeded.supervisors.confirm_claim(set_id, "third", 12, "h", now=at(6))
    with pytest.raises(ClaimLost, match="has taken it up already"):
        seeded.supervisors.confirm_claim(set_id, "third", 13, "h", now=at(7))
    # taken up: it can no longer be replaced
    assert not seeded.supervisors.claim_set(set_id, "fourth", now=at(8), replacing="third")
    assert seeded.supervisors.claim_of(set_id) == "third"
    assert seeded.jobs.get_recipe_set(set_id).supervisor_pid == 12


def test_a_stop_request_and_the_end_of_a_set_stop_its_supervisor(seeded: Repository) -> None:
    set_id = scheduled_set(seeded, "s1.lab")
    with pytest.raises(ConflictError, match="cancel it instead"):
        seeded.supervisors.request_stop(set_id, "cancelled by bob")
    claim = taken_up(seeded, set_id, 7, now=3)
    assert seeded.supervisors.request_stop(set_id, "cancelled by bob")
    assert not seeded.supervisors.request_stop(set_id, "again")
    assert seeded.supervisors.heartbeat(set_id, now=at(4), claim=claim) is Beat.STOP
    assert seeded.jobs.get_recipe_set(set_id).stop_reason == "cancelled by bob"
    (recipe,) = (r.id for r in seeded.jobs.get_recipe_set(set_id).recipes)
    seeded.moves.move_recipe(recipe, RecipeState.CANCELLED, now=at(5))
    assert seeded.jobs.get_recipe_set(set_id).finished_at == at(5)
    assert seeded.supervisors.stale_supervisors(older_than=at(100)) == []
    assert seeded.supervisors.heartbeat(set_id, now=at(6), claim=claim) is Beat.LOST
    assert not seeded.supervisors.request_stop(set_id, "late")
    with pytest.raises(ClaimLost, match="it has ended"):
        seeded.supervisors.guard_claim(set_id, claim)


def test_a_stopped_set_cannot_be_taken_up(seeded: Repository) -> None:
    set_id = scheduled_set(seeded, "s1.lab")
    seeded.supervisors.start_recipe_set(set_id, lab="lab1", now=at(3), claim="c")
    seeded.supervisors.request_stop(set_id, "cancelled by bob")
    with pytest.raises(ClaimLost, match="asked to stop: cancelled by bob"):
        seeded.supervisors.confirm_claim(set_id, "c", 7, "h", now=at(4))


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
    job_id = seeded.queue.submit_job(spec, owner="alice", now=at(1), source_format="native")
    ((a, b),) = recipe_ids(seeded, job_id)
    seeded.moves.move_recipe(a, RecipeState.SCHEDULED, now=at(2), system="s1.lab")
    seeded.moves.move_recipe(b, RecipeState.ASSIGNED, now=at(2))
    done = scheduled_set(seeded, "s2.lab")
    seeded.moves.move_recipe(
        seeded.jobs.get_recipe_set(done).recipes[0].id, RecipeState.CANCELLED, now=at(3)
    )
    (stored,) = seeded.restore.unfinished_sets()
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
    assert seeded.restore.unfinished_sets(set_ids=[done]) == []
    assert [s.fqdn for s in seeded.restore.systems_as_added()] == ["s1.lab", "s2.lab", "s3.lab"]


def test_pending_systems_are_the_free_ones_awaiting_the_event(seeded: Repository) -> None:
    # seed() leaves automated systems pending: nothing has run the event yet.
    assert seeded.restore.pending_systems() == ["s1.lab", "s2.lab"]
    seeded.systems.set_usage("s1.lab", Usage.IDLE, now=at(1))
    assert seeded.restore.pending_systems() == ["s2.lab"]


def test_priority_changes_only_for_waiting_sets(seeded: Repository) -> None:
    job_id = seeded.queue.submit_job(job_spec(1, 1), owner="bob", now=at(1), source_format="x")
    first, second = (s.id for s in seeded.jobs.load_job(job_id).sets)
    (recipe,) = (r.id for r in seeded.jobs.get_recipe_set(first).recipes)
    seeded.moves.move_recipe(recipe, RecipeState.SCHEDULED, now=at(2), system="s1.lab")
    seeded.supervisors.start_recipe_set(first, lab="lab1", now=at(2))
    assert seeded.queue.change_priority(job_id, Priority.LOW, actor="bob", now=at(3)) == [second]
    assert seeded.queue.change_priority(job_id, Priority.LOW, actor="bob", now=at(4)) == []
    sets = seeded.jobs.load_job(job_id).sets
    assert [s.spec.priority for s in sets] == [Priority.NORMAL, Priority.LOW]
    assert seeded.log.activity(kind="job")[0].new_value == "low"
    with pytest.raises(NotFoundError):
        seeded.queue.change_priority(job_id + 100, Priority.LOW, actor="bob", now=at(5))
