"""The run history (``repo.history``): kinds stored at submission, runs recorded at their end,
a bounded part read back for the predictions; on every store."""

from __future__ import annotations

from typing import Any

import pytest

from labq.domain.job import JobSpec
from labq.domain.states import RecipeState
from labq.store import Repository

from .conftest import at, recipe_ids


def suite(name: str = "boot", *, whiteboard: str = "nightly", **set_fields: Any) -> JobSpec:
    recipe = {"host": {"arch": "x86_64"}, "tasks": [{"name": name, "run": "true"}]}
    return JobSpec.model_validate(
        {"whiteboard": whiteboard, "recipe_sets": [{"recipes": [recipe], **set_fields}]}
    )


def run(
    repo: Repository,
    spec: JobSpec,
    start: float,
    seconds: float,
    *,
    owner: str = "bob",
    end: RecipeState = RecipeState.COMPLETED,
) -> int:
    """Submit ``spec`` and run its one set on s1.lab for ``seconds``; the set's id."""
    job_id = repo.queue.submit_job(spec, owner=owner, now=at(start), source_format="native")
    ((recipe,),) = recipe_ids(repo, job_id)
    set_id = repo.jobs.load_job(job_id).sets[0].id
    repo.moves.move_recipe(recipe, RecipeState.SCHEDULED, now=at(start), system="s1.lab")
    repo.supervisors.start_recipe_set(set_id, lab="lab1", now=at(start + 1))
    for step in (RecipeState.WAITING, RecipeState.INSTALLING, RecipeState.RUNNING):
        repo.moves.move_recipe(recipe, step, now=at(start + 1))
    repo.moves.move_recipe(recipe, end, now=at(start + 1 + seconds))
    return set_id


def test_the_same_job_submitted_again_is_the_same_kind(seeded: Repository) -> None:
    first = run(seeded, suite(whiteboard="monday"), 0, 100)
    again = run(seeded, suite(whiteboard="tuesday", priority="high"), 200, 100)
    other = run(seeded, suite("reboot"), 400, 100)
    keys = seeded.history.keys_of([first, again, other])
    assert keys[first].source == keys[again].source
    assert keys[first].work == keys[again].work
    assert keys[other].source != keys[first].source
    assert keys[other].work != keys[first].work
    assert keys[first].owner == "bob"
    assert keys[first].group is None


def test_params_change_the_source_but_not_the_work() -> None:
    from labq.domain.runkind import set_kinds

    def kinds(params: dict[str, Any]) -> Any:
        native = suite().canonical()
        native["recipe_sets"][0]["recipes"][0]["tasks"][0]["params"] = params
        return set_kinds(native, 0, native["recipe_sets"][0])

    assert kinds({"n": 1}).work == kinds({"n": 2}).work
    assert kinds({"n": 1}).source != kinds({"n": 2}).source
    assert kinds({"n": 1}) == kinds({"n": 1})


def test_a_run_is_recorded_once_with_its_length_and_outcome(seeded: Repository) -> None:
    done = run(seeded, suite(), 0, 600)
    record = seeded.history.record_run(done, now=at(601))
    assert record is not None
    assert record.seconds == pytest.approx(600)
    assert record.outcome == "completed"
    assert record.owner == "bob"
    assert seeded.history.record_run(done, now=at(700)) is None  # heard twice: once
    aborted = run(seeded, suite(), 1000, 50, end=RecipeState.ABORTED)
    assert seeded.history.record_run(aborted, now=at(1051)) is not None
    assert [r.set_id for r in seeded.history.recent(10)] == [done]  # completed only
    everything = seeded.history.recent(10, completed_only=False)
    assert [(r.set_id, r.outcome) for r in everything] == [
        (done, "completed"),
        (aborted, "aborted"),
    ]


def test_a_set_that_never_started_has_no_run(seeded: Repository) -> None:
    job_id = seeded.queue.submit_job(suite(), owner="bob", now=at(0), source_format="native")
    set_id = seeded.jobs.load_job(job_id).sets[0].id
    seeded.queue.cancel_job(job_id, actor="bob", now=at(5))
    assert seeded.history.record_run(set_id, now=at(5)) is None
    assert seeded.history.recent(10, completed_only=False) == []


def test_recent_is_bounded_per_key_and_oldest_first(seeded: Repository) -> None:
    boots = [run(seeded, suite(), 100 * i, 10 + i) for i in range(5)]
    for set_id in boots:
        seeded.history.record_run(set_id, now=at(10_000))
    loner = run(seeded, suite("lonely"), 1000, 5, owner="alice")
    seeded.history.record_run(loner, now=at(10_000))
    kept = [r.set_id for r in seeded.history.recent(2)]
    assert kept == [*boots[-2:], loner]


def test_a_retry_and_a_clone_keep_the_kind_of_their_original(seeded: Repository) -> None:
    original = run(seeded, suite(), 0, 10, end=RecipeState.ABORTED)
    retry = seeded.retries.clone_recipe_set(original, actor="scheduler", now=at(20))
    clone_job = seeded.queue.submit_job(
        suite(whiteboard="changed", max_time=600), owner="bob", now=at(30), source_format="native"
    )
    clone = seeded.jobs.load_job(clone_job).sets[0].id
    keys = seeded.history.keys_of([original, retry, clone])
    assert keys[clone].source != keys[original].source  # max_time differs: another source
    original_job = seeded.jobs.get_recipe_set(original).job_id
    seeded.sources.mark_clone(clone_job, of=original_job)
    keys = seeded.history.keys_of([original, retry, clone])
    assert keys[retry] == keys[original]
    assert keys[clone].source == keys[original].source


def test_runs_of_given_keys_and_kept_predictions(seeded: Repository) -> None:
    boot = run(seeded, suite(), 0, 100)
    other = run(seeded, suite("other"), 200, 50, owner="alice")
    for set_id in (boot, other):
        seeded.history.record_run(set_id, now=at(1000))
    keys = seeded.history.keys_of([boot])
    assert [r.set_id for r in seeded.history.for_keys(keys.values(), 5)] == [boot]
    assert seeded.history.for_keys([], 5) == []
    kept = {"seconds": 100.0, "spread": 0.0, "runs": 1, "median": 100.0, "basis": "source"}
    seeded.history.keep_predictions({boot: kept, other: None})
    assert seeded.history.predictions_of([boot, other]) == {boot: kept}
