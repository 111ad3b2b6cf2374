"""Listing jobs: filters, pages, and the derived state computed in SQL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import Connection, event

from labq.domain.states import RecipeState
from labq.store import Repository

from .conftest import ADMIN, at, job_spec, recipe_ids

# How each job's recipes move (None: stays new): the derived job state covers every case.
PLANS: list[tuple[list[list[RecipeState | None]], RecipeState]] = [
    ([[None]], RecipeState.NEW),
    ([[RecipeState.QUEUED, None]], RecipeState.NEW),
    ([[RecipeState.QUEUED], [RecipeState.ASSIGNED]], RecipeState.QUEUED),
    ([[RecipeState.CANCELLED, RecipeState.COMPLETED]], RecipeState.CANCELLED),
    ([[RecipeState.ABORTED], [RecipeState.COMPLETED]], RecipeState.ABORTED),
    ([[RecipeState.COMPLETED, RecipeState.COMPLETED]], RecipeState.COMPLETED),
    ([[RecipeState.RUNNING, RecipeState.COMPLETED]], RecipeState.RUNNING),
]
PATHS = {
    RecipeState.QUEUED: [RecipeState.QUEUED],
    RecipeState.ASSIGNED: [RecipeState.ASSIGNED],
    RecipeState.CANCELLED: [RecipeState.CANCELLED],
    RecipeState.RUNNING: [
        RecipeState.SCHEDULED,
        RecipeState.WAITING,
        RecipeState.INSTALLING,
        RecipeState.RUNNING,
    ],
}
FREE = ("s1.lab", "s2.lab")
PATHS[RecipeState.COMPLETED] = [*PATHS[RecipeState.RUNNING], RecipeState.COMPLETED]
PATHS[RecipeState.ABORTED] = [*PATHS[RecipeState.RUNNING], RecipeState.ABORTED]


def play(repo: Repository, plan: list[list[RecipeState | None]], owner: str, **job: Any) -> int:
    sizes = [len(s) for s in plan]
    job_id = repo.queue.submit_job(
        job_spec(*sizes, **job), owner=owner, now=at(1), source_format="x"
    )
    for recipes, targets in zip(recipe_ids(repo, job_id), plan, strict=True):
        for recipe, target in zip(recipes, targets, strict=True):
            for state in PATHS.get(target, []) if target else []:
                system = None
                if state is RecipeState.SCHEDULED:
                    system = next(f for f in FREE if repo.systems.get_system(f).recipe is None)
                repo.moves.move_recipe(recipe, state, now=at(2), system=system)
    return job_id


@pytest.fixture
def jobs(seeded: Repository) -> dict[int, RecipeState]:
    out = {}
    for i, (plan, state) in enumerate(PLANS):
        owner, group = ("alice", {"group": "kernel-qe"}) if i % 2 else ("bob", {})
        out[play(seeded, plan, owner, **group)] = state
    return out


@contextmanager
def counting(conn: Connection) -> Iterator[list[str]]:
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    event.listen(conn, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        event.remove(conn, "before_cursor_execute", count)


def test_the_state_filter_agrees_with_the_derived_state(
    seeded: Repository, jobs: dict[int, RecipeState]
) -> None:
    for job_id, state in jobs.items():
        assert seeded.jobs.load_job(job_id).state is state is seeded.jobs.job_state(job_id)
    for state in RecipeState:
        expected = sorted((j for j, s in jobs.items() if s is state), reverse=True)
        assert [j.id for j in seeded.jobs.list_jobs(state=state)] == expected, state
        assert seeded.jobs.count_jobs(state=state) == len(expected)


def test_a_retried_set_speaks_through_its_clone(
    seeded: Repository, jobs: dict[int, RecipeState]
) -> None:
    aborted = next(j for j, s in jobs.items() if s is RecipeState.ABORTED)
    first = seeded.jobs.load_job(aborted).sets[0]
    seeded.retries.clone_recipe_set(first.id, actor=ADMIN, now=at(3))
    assert aborted not in [j.id for j in seeded.jobs.list_jobs(state=RecipeState.ABORTED)]
    assert aborted in [j.id for j in seeded.jobs.list_jobs(state=RecipeState.NEW)]


def test_owner_group_and_pages(seeded: Repository, jobs: dict[int, RecipeState]) -> None:
    everyone = sorted(jobs, reverse=True)
    assert [j.id for j in seeded.jobs.list_jobs()] == everyone
    alices = [j.id for j in seeded.jobs.list_jobs(owner="alice")]
    assert alices == [j for j in everyone if seeded.jobs.load_job(j).owner == "alice"]
    assert [j.id for j in seeded.jobs.list_jobs(group="kernel-qe")] == alices
    # Jobs naming no group count as everybody's; every job is.
    assert [j.id for j in seeded.jobs.list_jobs(group="everybody")] == [
        j for j in everyone if j not in alices
    ]
    assert seeded.jobs.list_jobs(owner="nobody") == []
    pages = [seeded.jobs.list_jobs(limit=3, offset=o) for o in (0, 3, 6)]
    assert [j.id for page in pages for j in page] == everyone
    assert seeded.jobs.count_jobs(owner="alice", state=RecipeState.QUEUED) == len(
        [j for j in alices if jobs[j] is RecipeState.QUEUED]
    )
    assert [j.id for j in seeded.jobs.list_jobs(submitted_after=at(1))] == []
    with pytest.raises(ValueError, match="limit"):
        seeded.jobs.list_jobs(limit=0)


def test_a_page_costs_the_same_few_queries_however_many_jobs(seeded: Repository) -> None:
    for _ in range(5):
        play(seeded, [[RecipeState.QUEUED, None], [None]], "bob")
    with counting(seeded.conn) as few:
        assert len(seeded.jobs.list_jobs(state=RecipeState.NEW)) == 5
    for _ in range(30):
        play(seeded, [[RecipeState.QUEUED, None], [None]], "bob")
    with counting(seeded.conn) as many:
        assert len(seeded.jobs.list_jobs(state=RecipeState.NEW, limit=100)) == 35
    assert len(many) == len(few) <= 6
