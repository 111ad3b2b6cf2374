"""Usage history and the utilisation computed from it equal the time actually spent."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from datetime import datetime, timedelta
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labq.domain.states import Condition, RecipeState, Usage
from labq.errors import LabqError
from labq.store import Repository, epoch

from .conftest import Database, at, job_spec, recipe_ids, seed


def run_for(repo: Repository, system: str, start: int, end: int) -> None:
    """One recipe holds ``system`` from ``start`` to ``end`` seconds."""
    job_id = repo.queue.submit_job(job_spec(), owner="bob", now=at(start), source_format="native")
    ((recipe,),) = recipe_ids(repo, job_id)
    repo.moves.move_recipe(recipe, RecipeState.SCHEDULED, now=at(start), system=system)
    repo.moves.move_recipe(recipe, RecipeState.WAITING, now=at(start + 1))
    repo.moves.move_recipe(recipe, RecipeState.CANCELLED, now=at(end))


def test_utilisation_is_the_busy_share_of_recorded_time(seeded: Repository) -> None:
    run_for(seeded, "s1.lab", 20, 50)
    assert seeded.systems.utilisation(fqdn="s1.lab", start=at(0), end=at(100)) == pytest.approx(0.3)
    assert seeded.systems.utilisation(fqdn="s1.lab", start=at(40), end=at(60)) == pytest.approx(0.5)
    assert seeded.systems.utilisation(fqdn="s2.lab", start=at(0), end=at(100)) == 0.0
    # Open rows count up to `now` when it is given.
    assert seeded.systems.utilisation(
        fqdn="s1.lab", start=at(0), end=at(100), now=at(60)
    ) == pytest.approx(30 / 60)


def test_a_pool_and_the_whole_lab_add_their_systems_up(seeded: Repository) -> None:
    run_for(seeded, "s1.lab", 0, 50)
    run_for(seeded, "s2.lab", 0, 25)
    assert seeded.systems.utilisation(pool="perf", start=at(0), end=at(100)) == pytest.approx(0.5)
    everything = seeded.systems.utilisation(start=at(0), end=at(100))
    assert everything == pytest.approx(75 / 300)


def test_the_history_has_one_open_row_per_system(seeded: Repository) -> None:
    run_for(seeded, "s1.lab", 10, 20)
    for fqdn in ("s1.lab", "s2.lab", "s3.lab"):
        rows = seeded.systems.usage_history(fqdn)
        assert [r.end is None for r in rows].count(True) == 1
        assert rows[-1].end is None


# --- changes that come faster than the clock ticks ------------------------------

FQDNS = ("s1.lab", "s2.lab", "s3.lab")
# How far the next change's clock is from the last one's: the same tick, a tick on,
# or a little behind (another process's clock).
SKEWS = st.sampled_from([0, 0, 0, 1, -1, -2, 5, -500, 1000])


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_fast_changes_keep_the_history_contiguous(db: Database, data: st.DataObject) -> None:
    with db.engine.connect() as conn:
        conn.begin()
        repo = Repository(conn)
        seed(repo)
        job_id = repo.queue.submit_job(
            job_spec(1, 1), owner="bob", now=at(0), source_format="native"
        )
        recipes = [r for s in recipe_ids(repo, job_id) for r in s]
        clock = at(10)
        for _ in range(data.draw(st.integers(1, 25), label="changes")):
            clock += timedelta(microseconds=data.draw(SKEWS, label="skew"))
            change = _draw_change(data, repo, recipes, clock)
            with suppress(LabqError):  # refused by the lifecycle or a guard: nothing written
                change()
        for fqdn in FQDNS:
            _assert_contiguous(repo, fqdn)
        conn.rollback()


def _draw_change(
    data: st.DataObject, repo: Repository, recipes: list[int], now: datetime
) -> Callable[[], object]:
    kind = data.draw(st.sampled_from(["condition", "condition", "usage", "recipe"]))
    fqdn = data.draw(st.sampled_from(FQDNS))
    if kind == "condition":
        condition = data.draw(st.sampled_from(Condition))
        return lambda: repo.systems.set_condition(fqdn, condition, now=now, actor="hypothesis")
    if kind == "usage":
        usage = data.draw(st.sampled_from([Usage.IDLE, Usage.PENDING]))
        return lambda: repo.systems.set_usage(fqdn, usage, now=now)
    recipe = data.draw(st.sampled_from(recipes))
    target = data.draw(st.sampled_from(RecipeState))
    return lambda: repo.moves.move_recipe(recipe, target, now=now, system=fqdn)


def _assert_contiguous(repo: Repository, fqdn: str) -> None:
    """Each row ends where the next starts, none goes back, the last alone is open."""
    rows = repo.systems.usage_history(fqdn)
    assert rows[0].start == epoch(at(0))
    for row, after in pairwise(rows):
        assert row.end is not None
        assert row.start <= row.end == after.start
    assert rows[-1].end is None
    system = repo.systems.get_system(fqdn)
    last = rows[-1]
    assert (last.usage, last.condition, last.recipe) == (
        system.usage,
        system.condition,
        system.recipe,
    )


def test_a_job_is_taken_in_when_the_scheduler_first_moves_a_recipe(seeded: Repository) -> None:
    """``labq sim export`` replays a job from that moment, not from its commit (a loaded
    scheduler hears of a job late; a replay from the commit starts its sets early)."""
    job_id = seeded.queue.submit_job(job_spec(), owner="bob", now=at(10), source_format="native")
    ((recipe,),) = recipe_ids(seeded, job_id)
    unseen = seeded.queue.submit_job(job_spec(), owner="bob", now=at(10), source_format="native")
    ((never,),) = recipe_ids(seeded, unseen)
    seeded.moves.move_recipe(recipe, RecipeState.QUEUED, now=at(10.7))
    seeded.moves.move_recipe(recipe, RecipeState.SCHEDULED, now=at(12), system="s1.lab")
    taken = seeded.accounting.taken_in_at([recipe, never])
    assert set(taken) == {recipe}  # the other was never seen: its commit stands
    assert epoch(taken[recipe]) == pytest.approx(epoch(at(10.7)))
