"""Usage history and the utilisation computed from it equal the time actually spent."""

from __future__ import annotations

import pytest

from labq.domain.states import RecipeState
from labq.store import Repository

from .conftest import at, job_spec, recipe_ids


def run_for(repo: Repository, system: str, start: int, end: int) -> None:
    """One recipe holds ``system`` from ``start`` to ``end`` seconds."""
    job_id = repo.submit_job(job_spec(), owner="bob", now=at(start), source_format="native")
    ((recipe,),) = recipe_ids(repo, job_id)
    repo.move_recipe(recipe, RecipeState.SCHEDULED, now=at(start), system=system)
    repo.move_recipe(recipe, RecipeState.WAITING, now=at(start + 1))
    repo.move_recipe(recipe, RecipeState.CANCELLED, now=at(end))


def test_utilisation_is_the_busy_share_of_recorded_time(seeded: Repository) -> None:
    run_for(seeded, "s1.lab", 20, 50)
    assert seeded.utilisation(fqdn="s1.lab", start=at(0), end=at(100)) == pytest.approx(0.3)
    assert seeded.utilisation(fqdn="s1.lab", start=at(40), end=at(60)) == pytest.approx(0.5)
    assert seeded.utilisation(fqdn="s2.lab", start=at(0), end=at(100)) == 0.0
    # Open rows count up to `now` when it is given.
    assert seeded.utilisation(fqdn="s1.lab", start=at(0), end=at(100), now=at(60)) == pytest.approx(
        30 / 60
    )


def test_a_pool_and_the_whole_lab_add_their_systems_up(seeded: Repository) -> None:
    run_for(seeded, "s1.lab", 0, 50)
    run_for(seeded, "s2.lab", 0, 25)
    assert seeded.utilisation(pool="perf", start=at(0), end=at(100)) == pytest.approx(0.5)
    everything = seeded.utilisation(start=at(0), end=at(100))
    assert everything == pytest.approx(75 / 300)


def test_the_history_has_one_open_row_per_system(seeded: Repository) -> None:
    run_for(seeded, "s1.lab", 10, 20)
    for fqdn in ("s1.lab", "s2.lab", "s3.lab"):
        rows = seeded.usage_history(fqdn)
        assert [r.end is None for r in rows].count(True) == 1
        assert rows[-1].end is None
