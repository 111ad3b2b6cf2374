"""Cloning a recipe set for a retry (seed 003): the storage side only."""

from __future__ import annotations

import pytest

from labq.domain.job import JobSpec
from labq.domain.states import RecipeState
from labq.errors import ConflictError, NotFoundError
from labq.store import Repository

from .conftest import ADMIN, at, job_spec, recipe_ids


def abort_on(repo: Repository, recipe: int, system: str) -> None:
    repo.moves.move_recipe(recipe, RecipeState.SCHEDULED, now=at(2), system=system)
    repo.moves.move_recipe(recipe, RecipeState.ABORTED, now=at(3))


def test_a_clone_points_at_its_original_and_excludes_where_it_aborted(
    seeded: Repository,
) -> None:
    spec = job_spec(2)
    job_id = seeded.queue.submit_job(spec, owner="bob", now=at(1), source_format="native")
    ((a, b),) = recipe_ids(seeded, job_id)
    abort_on(seeded, a, "s1.lab")
    seeded.moves.move_recipe(b, RecipeState.CANCELLED, now=at(3))
    original = seeded.jobs.load_job(job_id).sets[0]
    clone_id = seeded.retries.clone_recipe_set(original.id, actor=ADMIN, now=at(4))
    clone = seeded.jobs.get_recipe_set(clone_id)
    assert (clone.retry_of, clone.attempt, clone.position) == (original.id, 2, 1)
    assert [r.state for r in clone.recipes] == [RecipeState.NEW, RecipeState.NEW]
    assert [r.exclude for r in clone.spec.recipes] == [["s1.lab"], []]
    assert clone.spec.model_copy(update={"recipes": original.spec.recipes}) == original.spec
    # The job now speaks through its latest attempt.
    view = seeded.jobs.load_job(job_id)
    assert [s.id for s in view.current_sets] == [clone_id]
    assert view.state is seeded.jobs.job_state(job_id) is RecipeState.NEW
    assert view.spec == spec.model_copy(update={"owner": "bob"})  # clones are not submitted


def test_excludes_accumulate_over_attempts(seeded: Repository) -> None:
    job_id = seeded.queue.submit_job(job_spec(1), owner="bob", now=at(1), source_format="native")
    ((recipe,),) = recipe_ids(seeded, job_id)
    set_id = seeded.jobs.load_job(job_id).sets[0].id
    for system in ("s2.lab", "s1.lab"):
        abort_on(seeded, recipe, system)
        set_id = seeded.retries.clone_recipe_set(set_id, actor=ADMIN, now=at(4))
        (recipe,) = (r.id for r in seeded.jobs.get_recipe_set(set_id).recipes)
    latest = seeded.jobs.get_recipe_set(set_id)
    assert latest.attempt == 3
    assert latest.spec.recipes[0].exclude == ["s1.lab", "s2.lab"]


def test_only_an_ended_set_is_cloned_and_only_once(seeded: Repository) -> None:
    job_id = seeded.queue.submit_job(job_spec(1), owner="bob", now=at(1), source_format="native")
    ((recipe,),) = recipe_ids(seeded, job_id)
    set_id = seeded.jobs.load_job(job_id).sets[0].id
    with pytest.raises(ConflictError, match="not ended"):
        seeded.retries.clone_recipe_set(set_id, actor=ADMIN, now=at(2))
    abort_on(seeded, recipe, "s1.lab")
    seeded.retries.clone_recipe_set(set_id, actor=ADMIN, now=at(4))
    with pytest.raises(ConflictError, match="already"):
        seeded.retries.clone_recipe_set(set_id, actor=ADMIN, now=at(5))
    assert len(seeded.jobs.load_job(job_id).sets) == 2
    with pytest.raises(NotFoundError):
        seeded.retries.clone_recipe_set(set_id + 10, actor=ADMIN, now=at(5))


def test_a_set_carries_a_plain_words_error(seeded: Repository) -> None:
    job_id = seeded.queue.submit_job(job_spec(1), owner="bob", now=at(1), source_format="native")
    set_id = seeded.jobs.load_job(job_id).sets[0].id
    seeded.retries.set_recipe_set_error(set_id, "r0: s1.lab excluded; no other system has 64 GiB")
    assert seeded.jobs.get_recipe_set(set_id).error.startswith("r0: s1.lab excluded")
    with pytest.raises(NotFoundError):
        seeded.retries.set_recipe_set_error(set_id + 10, None)


def retried(size: int, max_retries: int) -> JobSpec:
    """A job of one set of ``size`` recipes that may be retried ``max_retries`` times."""
    native = job_spec(size).model_dump(mode="json")
    native["recipe_sets"][0]["max_retries"] = max_retries
    return JobSpec.model_validate(native)


def test_a_job_has_not_ended_while_a_retry_is_owed(seeded: Repository) -> None:
    job_id = seeded.queue.submit_job(retried(1, 1), owner="bob", now=at(1), source_format="native")
    ((recipe,),) = recipe_ids(seeded, job_id)
    abort_on(seeded, recipe, "s1.lab")  # the supervisor's move; the scheduler has not heard yet
    set_id = seeded.jobs.load_job(job_id).sets[0].id

    def everywhere() -> set[RecipeState]:
        listed = {
            s for s in RecipeState if job_id in [j.id for j in seeded.jobs.list_jobs(state=s)]
        }
        ended = seeded.admission.ended_jobs([job_id]).get(job_id)
        return {seeded.jobs.load_job(job_id).state, seeded.jobs.job_state(job_id), *listed} | (
            {ended} if ended else set()
        )

    assert seeded.jobs.get_recipe_set(set_id).state is RecipeState.ABORTED  # the set did end
    assert everywhere() == {RecipeState.NEW}  # its next attempt is owed
    seeded.retries.set_recipe_set_error(set_id, "not re-scheduled: nothing else fits")
    assert everywhere() == {RecipeState.ABORTED}
    seeded.retries.set_recipe_set_error(set_id, None)
    seeded.retries.clone_recipe_set(set_id, actor=ADMIN, now=at(4))
    assert everywhere() == {RecipeState.NEW}


@pytest.mark.parametrize(
    ("max_retries", "other", "expected"),
    [
        (0, None, RecipeState.ABORTED),  # no retries allowed
        (1, RecipeState.CANCELLED, RecipeState.ABORTED),  # cancelled sets are not retried
        (1, RecipeState.COMPLETED, RecipeState.NEW),  # one aborted, one passed: retried
    ],
)
def test_a_retry_is_owed_only_to_an_aborted_set_within_its_retries(
    seeded: Repository, max_retries: int, other: RecipeState | None, expected: RecipeState
) -> None:
    size = 1 if other is None else 2
    job_id = seeded.queue.submit_job(
        retried(size, max_retries), owner="bob", now=at(1), source_format="native"
    )
    ((recipe, *rest),) = recipe_ids(seeded, job_id)
    abort_on(seeded, recipe, "s1.lab")
    for more in rest:
        seeded.moves.move_recipe(more, RecipeState.SCHEDULED, now=at(2), system="s2.lab")
        for state in (RecipeState.WAITING, RecipeState.INSTALLING, RecipeState.RUNNING):
            seeded.moves.move_recipe(more, state, now=at(2))
        seeded.moves.move_recipe(more, other or RecipeState.COMPLETED, now=at(3))
    assert seeded.jobs.load_job(job_id).state is seeded.jobs.job_state(job_id) is expected
    assert [j.id for j in seeded.jobs.list_jobs(state=expected)] == [job_id]


def test_a_clone_keeps_fetched_tasks_and_guest_recipes(seeded: Repository) -> None:
    recipe = {
        "tasks": [{"fetch": {"url": "git://h.example/t.git?main#a"}}],
        "guests": [{"name": "vm1", "args": "--ram=1", "tasks": [{"name": "g"}]}],
    }
    spec = JobSpec.model_validate({"recipe_sets": [{"recipes": [recipe]}]})
    job_id = seeded.queue.submit_job(spec, owner="bob", now=at(1), source_format="native")
    ((only,),) = recipe_ids(seeded, job_id)
    abort_on(seeded, only, "s1.lab")
    original = seeded.jobs.load_job(job_id).sets[0]
    clone = seeded.jobs.get_recipe_set(
        seeded.retries.clone_recipe_set(original.id, actor=ADMIN, now=at(4))
    )
    (cloned,) = clone.spec.recipes
    assert cloned.tasks == original.spec.recipes[0].tasks
    assert cloned.guests == original.spec.recipes[0].guests
    assert [(t.name, t.guest) for t in clone.recipes[0].tasks] == [
        ("/h.example/t.git/a", None),
        ("g", "vm1"),
    ]
