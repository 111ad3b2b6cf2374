"""Runs: jobs submitted together, their Pulpito-like counts, listing and cancelling a run."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from labq.domain.runs import check_name, job_status
from labq.domain.states import RecipeState, Result
from labq.errors import ConflictError, InputError, NotFoundError
from labq.store import Repository
from labq.store.tables import Runs

from .conftest import at, job_spec, recipe_ids


def make_run(repo: Repository, name: str, jobs: int) -> list[int]:
    run_id = repo.runs.create_run(name, owner="alice", now=at(1), meta={"suite": "rados"})
    return [
        repo.queue.submit_job(
            job_spec(), owner="alice", now=at(1), source_format="native", run_id=run_id
        )
        for _ in range(jobs)
    ]


def finish(repo: Repository, job_id: int, state: RecipeState, result: Result | None) -> None:
    (recipe,) = recipe_ids(repo, job_id)[0]
    repo.moves.move_recipe(recipe, RecipeState.QUEUED, now=at(2))
    if state is RecipeState.CANCELLED:
        repo.moves.move_recipe(recipe, state, now=at(3))
        return
    repo.moves.move_recipe(recipe, RecipeState.SCHEDULED, now=at(2), system="s1.lab")
    for step in (RecipeState.WAITING, RecipeState.INSTALLING, RecipeState.RUNNING):
        repo.moves.move_recipe(recipe, step, now=at(3))
    if state is RecipeState.RUNNING:
        return
    repo.reports.set_recipe_result(recipe, result)
    repo.moves.move_recipe(recipe, state, now=at(4))


def test_a_run_counts_its_jobs_like_pulpito(seeded: Repository) -> None:
    jobs = make_run(seeded, "rados-2026-11-24", 6)
    finish(seeded, jobs[2], RecipeState.COMPLETED, Result.PASS)
    finish(seeded, jobs[3], RecipeState.COMPLETED, Result.FAIL)
    finish(seeded, jobs[4], RecipeState.CANCELLED, None)
    finish(seeded, jobs[5], RecipeState.COMPLETED, Result.WARN)
    finish(seeded, jobs[1], RecipeState.RUNNING, None)  # last: it keeps s1.lab
    run = seeded.runs.load_run("rados-2026-11-24")
    assert [j.id for j in run.jobs] == jobs
    assert run.summary.counts == {"queued": 1, "running": 1, "pass": 1, "fail": 2, "dead": 1}
    assert run.summary.total == 6
    assert run.summary.meta == {"suite": "rados"}
    assert run.summary.owner == "alice"
    (listed,) = seeded.runs.list_runs()
    assert listed.counts == run.summary.counts


def test_runs_list_newest_first_and_jobs_outside_runs_stay_out(seeded: Repository) -> None:
    make_run(seeded, "first", 1)
    make_run(seeded, "second", 2)
    seeded.queue.submit_job(job_spec(), owner="alice", now=at(1), source_format="native")
    assert [r.name for r in seeded.runs.list_runs()] == ["second", "first"]
    assert [r.total for r in seeded.runs.list_runs()] == [2, 1]
    assert [r.name for r in seeded.runs.list_runs(limit=1, offset=1)] == ["first"]
    assert seeded.runs.count_runs() == 2


def test_an_empty_run_has_zero_counts(seeded: Repository) -> None:
    seeded.runs.create_run("empty", owner="bob", now=at(1))
    assert seeded.runs.load_run("empty").summary.counts == dict.fromkeys(
        ("queued", "running", "pass", "fail", "dead"), 0
    )


def test_run_names_are_unique_and_checked(seeded: Repository) -> None:
    make_run(seeded, "nightly", 1)
    with pytest.raises(ConflictError, match="already a run named 'nightly'"):
        seeded.runs.create_run("nightly", owner="bob", now=at(2))
    for bad in ("", "has space", "a/b", "-x", "x" * 201):
        with pytest.raises(InputError, match="run name"):
            seeded.runs.create_run(bad, owner="bob", now=at(2))
    assert seeded.conn.execute(select(func.count(Runs.id))).scalar_one() == 1
    with pytest.raises(NotFoundError, match="no run named 'other'"):
        seeded.runs.load_run("other")


def test_cancelling_a_run_cancels_its_unfinished_jobs_only(seeded: Repository) -> None:
    jobs = make_run(seeded, "r1", 3)
    other = make_run(seeded, "r2", 1)
    finish(seeded, jobs[0], RecipeState.COMPLETED, Result.PASS)
    finish(seeded, jobs[1], RecipeState.RUNNING, None)
    done = seeded.runs.cancel_run("r1", actor="alice", now=at(5), reason="wrong branch")
    assert done == {jobs[1]: 1, jobs[2]: 1}
    assert seeded.jobs.job_state(jobs[0]) is RecipeState.COMPLETED
    assert seeded.jobs.job_state(jobs[2]) is RecipeState.CANCELLED
    # a started set is asked to stop: its supervisor ends it
    assert seeded.jobs.load_job(jobs[1]).sets[0].stop_reason == "wrong branch"
    assert seeded.jobs.job_state(other[0]) is RecipeState.NEW
    assert seeded.runs.cancel_run("r1", actor="alice", now=at(6)) == {}
    with pytest.raises(NotFoundError):
        seeded.runs.cancel_run("nope", actor="alice", now=at(6))


def test_job_status_covers_every_state() -> None:
    assert job_status(RecipeState.ASSIGNED, None) == "queued"
    assert job_status(RecipeState.INSTALLING, None) == "running"
    assert job_status(RecipeState.COMPLETED, None) == "pass"
    assert job_status(RecipeState.ABORTED, Result.FAIL) == "dead"
    assert check_name("ceph-2026-11-24_10:00:00-rados") == "ceph-2026-11-24_10:00:00-rados"
