"""The charts' time series, from rows written through the repository, on every store."""

from __future__ import annotations

import pytest

from labq.domain.model import System
from labq.domain.states import RecipeState
from labq.errors import NotFoundError
from labq.store import Repository, epoch, transaction
from labq.web.charts import GanttSpan, Series
from labq.web.series import queue_over_time, system_timeline, utilisation_over_time

from .conftest import ADMIN, Database, at, job_spec, recipe_ids, seed


def hold(repo: Repository, system: str, start: int, end: int | None = None) -> int:
    """A one-recipe job submitted at ``start`` runs on ``system`` from then to ``end``."""
    job_id = repo.queue.submit_job(job_spec(), owner="bob", now=at(start), source_format="native")
    ((recipe,),) = recipe_ids(repo, job_id)
    repo.moves.move_recipe(recipe, RecipeState.SCHEDULED, now=at(start), system=system)
    repo.moves.move_recipe(recipe, RecipeState.WAITING, now=at(start + 1))
    if end is not None:
        repo.moves.move_recipe(recipe, RecipeState.CANCELLED, now=at(end))
    return job_id


def points(*pairs: tuple[float, float]) -> tuple[tuple[float, float], ...]:
    """``(seconds after the tests' epoch, value)`` as epoch points."""
    return tuple((epoch(at(t)), v) for t, v in pairs)


def flat(pairs: tuple[tuple[float, float], ...]) -> list[float]:
    """Points as one list of numbers, for ``pytest.approx``."""
    return [n for pair in pairs for n in pair]


def test_a_system_busy_half_the_interval_is_half_used(db: Database) -> None:
    with transaction(db.engine) as repo:
        seed(repo)  # lab1: s1 (pool perf), s2, s3 (manual)
        hold(repo, "s1.lab", 0, 50)
    whole = utilisation_over_time(db.engine, by="pool", start=at(0), end=at(100), buckets=1)
    assert whole == [Series("perf", points((50, 0.5)))]
    halves = utilisation_over_time(db.engine, by="pool", start=at(0), end=at(100), buckets=2)
    assert halves == [Series("perf", points((25, 1.0), (75, 0.0)))]
    (lab,) = utilisation_over_time(db.engine, by="lab", start=at(0), end=at(100), buckets=4)
    # three systems: s1 busy for the first two quarters
    assert lab.name == "lab1"
    assert flat(lab.points) == pytest.approx(
        flat(points((12.5, 1 / 3), (37.5, 1 / 3), (62.5, 0), (87.5, 0)))
    )


def test_open_rows_count_up_to_now_and_systems_count_from_when_added(db: Database) -> None:
    with transaction(db.engine) as repo:
        seed(repo)
        repo.systems.add_lab("lab2", actor=ADMIN, now=at(0))
        repo.systems.add_system(System("s4.lab2", "lab2"), actor=ADMIN, now=at(50))
        hold(repo, "s4.lab2", 60)  # still running
    series = utilisation_over_time(
        db.engine, by="lab", start=at(0), end=at(100), buckets=2, now=at(80)
    )
    by_name = {s.name: s.points for s in series}
    assert by_name["lab1"] == points((25, 0.0), (75, 0.0))
    # no point before s4 existed; then busy 20 of the 30 s recorded up to now
    assert flat(by_name["lab2"]) == pytest.approx(flat(points((75, 20 / 30))))


def test_queue_length_and_wait_follow_submissions_and_starts(db: Database) -> None:
    with transaction(db.engine) as repo:
        seed(repo)
        started = {}
        for job, (submitted, start, fqdn) in {
            "a": (0, 10, "s1.lab"),
            "b": (5, 30, "s2.lab"),
        }.items():
            job_id = repo.queue.submit_job(
                job_spec(), owner="bob", now=at(submitted), source_format="native"
            )
            ((recipe,),) = recipe_ids(repo, job_id)
            repo.moves.move_recipe(recipe, RecipeState.SCHEDULED, now=at(start), system=fqdn)
            set_id = repo.jobs.load_job(job_id).sets[0].id
            assert repo.supervisors.start_recipe_set(set_id, lab="lab1", now=at(start))
            started[job] = set_id
        cancelled = repo.queue.submit_job(
            job_spec(), owner="bob", now=at(20), source_format="native"
        )
        repo.queue.cancel_job(cancelled, actor="bob", now=at(60))
        repo.queue.submit_job(job_spec(), owner="bob", now=at(80), source_format="native")
    (queued,), (wait,) = queue_over_time(db.engine, start=at(0), end=at(100), buckets=4)
    assert queued == Series("all", points((25, 2), (50, 1), (75, 0), (100, 1)))
    # mean wait at each bucket's end: of the sets that started in it (a: 10 s; b: 25 s) and
    # of those still waiting then (at 25: b 20 s and the cancelled one 5 s; at 100: the last,
    # 20 s); from 50 to 75 nothing started and nothing waited
    assert flat(wait.points) == pytest.approx(flat(points((25, 35 / 3), (50, 27.5), (100, 20))))


def test_a_queue_that_does_not_move_shows_a_wait_that_grows(db: Database) -> None:
    with transaction(db.engine) as repo:
        seed(repo)
        for submitted in (0, 10):
            repo.queue.submit_job(
                job_spec(), owner="bob", now=at(submitted), source_format="native"
            )
    (queued,), (wait,) = queue_over_time(db.engine, start=at(0), end=at(100), buckets=4)
    assert queued.points == points((25, 2), (50, 2), (75, 2), (100, 2))
    assert flat(wait.points) == flat(points((25, 20), (50, 45), (75, 70), (100, 95)))


def test_the_queue_is_empty_before_anything_was_submitted(db: Database) -> None:
    with transaction(db.engine) as repo:
        seed(repo)
        repo.queue.submit_job(job_spec(), owner="bob", now=at(500), source_format="native")
    (queued,), (wait,) = queue_over_time(db.engine, start=at(0), end=at(100), buckets=2)
    assert queued.points == points((50, 0), (100, 0))
    assert wait.points == ()


def test_the_timeline_has_one_row_per_system_clipped_to_the_interval(db: Database) -> None:
    with transaction(db.engine) as repo:
        seed(repo)
        job_id = hold(repo, "s1.lab", 20, 50)
        ((recipe,),) = recipe_ids(repo, job_id)
    rows = system_timeline(db.engine, start=at(0), end=at(100))
    assert [r.label for r in rows] == ["s1.lab", "s2.lab", "s3.lab"]
    s1 = rows[0].spans
    assert [(s.state, s.start, s.end) for s in s1] == [
        (state, epoch(at(a)), epoch(at(b)))
        for state, a, b in (
            ("pending", 0, 20),
            ("scheduled", 20, 21),
            ("waiting", 21, 50),
            ("pending", 50, 100),
        )
    ]
    assert s1[2].tooltip.startswith(f"s1.lab: waiting, recipe {recipe}\n")
    assert "(29\xa0s)" in s1[2].tooltip
    assert [s.state for s in rows[2].spans] == ["idle"]
    assert "(manual)" in rows[2].spans[0].tooltip

    window = system_timeline(db.engine, start=at(30), end=at(40), fqdns=["s2.lab", "s1.lab"])
    assert [r.label for r in window] == ["s2.lab", "s1.lab"]
    assert window[1].spans == (GanttSpan(epoch(at(30)), epoch(at(40)), "waiting", s1[2].tooltip),)
    with pytest.raises(NotFoundError, match=r"nowhere\.lab"):
        system_timeline(db.engine, start=at(0), end=at(1), fqdns=["nowhere.lab"])


def test_an_empty_interval_is_refused(db: Database) -> None:
    with pytest.raises(ValueError, match="before it starts"):
        utilisation_over_time(db.engine, by="lab", start=at(10), end=at(10))
    with pytest.raises(ValueError, match="buckets"):
        queue_over_time(db.engine, start=at(0), end=at(10), buckets=0)
