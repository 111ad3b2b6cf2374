"""How fast the service commits what the scheduler decides (not a test: run it by hand).

    .venv/bin/python bench/persistence.py [--sets 1000] [--repeat 50] [--db sqlite,postgres]
        [--profile EVENT]

For each database, in one run, with the real scheduler service (one thread,
one transaction per event, the leader's fence) over a lab of SETS systems:

- ``raw``: the database's own rate for placement-shaped rows written in batches
  (one multi-row UPDATE of recipes, one of systems, one multi-row INSERT of
  history rows per SETS placements) — the reference the others are read against;
- ``place``: one submit event that places SETS single-recipe sets on SETS idle
  systems: placements per second;
- ``submit``: a submit event that only queues a one-set job (every system busy);
- ``burst``: the same per job when 4 × REPEAT of them are submitted at once (queued
  submissions are taken together, in one transaction);
- ``finish``: a set-finished event (its supervisor ended it; its system goes to
  the next queued set).

``submit ms`` and ``finish ms`` are medians from posting the event until the
service has handled it (two hand-offs between threads, which a loaded machine
slows); ``decided`` is the mean the service's own timer took, from taking the
event to its commit (what ``labq_scheduling_decision_seconds`` exports).

PostgreSQL is LABQ_TEST_PG_URL (a database is made and dropped). ``--profile
place|submit|finish`` prints where the posting thread waits (cProfile); to see
the service thread's own time, profile ``SchedulerService._handle`` directly.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine, create_engine, make_url, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' doubles

from tests.doubles import RecordingDispatcher

from labq.config import Settings
from labq.domain.events import JobSubmitted
from labq.domain.job import JobSpec
from labq.domain.model import System
from labq.domain.states import RecipeState
from labq.service.inbox import SupervisorExited
from labq.service.loop import SchedulerService
from labq.store import make_engine, transaction, upgrade
from labq.usecases.timing import DECISION_SECONDS

PG_URL = os.environ.get("LABQ_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
RUN = (RecipeState.WAITING, RecipeState.INSTALLING, RecipeState.RUNNING, RecipeState.COMPLETED)


class Clock:
    """A clock that moves a millisecond per reading: every event at its own time."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 24, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


@contextmanager
def database(kind: str, root: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{root / 'bench.db'}"
        return
    admin = create_engine(make_url(PG_URL), isolation_level="AUTOCOMMIT")
    name = f"labq_bench_persistence_{os.getpid()}"
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def raw_rate(engine: Engine, rows: int) -> float:
    """Placement-shaped rows per second, written as batches (the database's own speed)."""
    with engine.begin() as conn:
        conn.execute(text("CREATE TEMPORARY TABLE bench_a (id INTEGER PRIMARY KEY, s TEXT, x INT)"))
        conn.execute(text("CREATE TEMPORARY TABLE bench_b (id INTEGER PRIMARY KEY, u TEXT, r INT)"))
        conn.execute(text("CREATE TEMPORARY TABLE bench_h (id INTEGER, s TEXT, at TEXT)"))
        for table in ("bench_a", "bench_b"):
            values = ",".join(f"({i}, 'new', NULL)" for i in range(rows))
            conn.execute(text(f"INSERT INTO {table} VALUES {values}"))
    best = 0.0
    for round_ in range(5):
        values = ",".join(f"({i}, {i + round_})" for i in range(rows))
        began = time.perf_counter()
        with engine.begin() as conn:
            conn.execute(
                text(
                    f"WITH v(id, x) AS (VALUES {values}) UPDATE bench_a SET s = 'scheduled',"
                    " x = v.x FROM v WHERE bench_a.id = v.id"
                )
            )
            conn.execute(
                text(
                    f"WITH v(id, x) AS (VALUES {values}) UPDATE bench_b SET u = 'scheduled',"
                    " r = v.x FROM v WHERE bench_b.id = v.id"
                )
            )
            history = ",".join(f"({i}, 'scheduled', '2026-11-24')" for i in range(rows))
            conn.execute(text(f"INSERT INTO bench_h VALUES {history}"))
        best = max(best, 3 * rows / (time.perf_counter() - began))
    return best


def lab(engine: Engine, systems: int) -> None:
    now = datetime(2026, 11, 24, tzinfo=UTC)
    with transaction(engine) as repo:
        repo.systems.add_lab("lab1", actor="bench", now=now)
        repo.people.add_user("alice", actor="bench", now=now)
        for i in range(systems):
            repo.systems.add_system(System(f"s{i}.lab1", "lab1"), actor="bench", now=now)


def submit(engine: Engine, sets: int, now: datetime) -> int:
    spec = JobSpec.model_validate(
        {"recipe_sets": [{"recipes": [{"tasks": [{"name": "t", "run": "true"}]}]}] * sets}
    )
    with transaction(engine) as repo:
        return repo.queue.submit_job(spec, owner="alice", now=now, source_format="native")


def decided(kind: str) -> tuple[float, float]:
    """Seconds the service spent deciding events of ``kind``, and how many (its own timer:
    from taking the event to the commit, without the hand-offs between threads)."""
    found = {"sum": 0.0, "count": 0.0}
    for family in DECISION_SECONDS.collect():
        for sample in family.samples:
            end = sample.name.rsplit("_", 1)[-1]
            if sample.labels.get("event") == kind and end in found:
                found[end] = sample.value
    return found["sum"], found["count"]


def mean_since(kind: str, before: tuple[float, float]) -> float:
    after = decided(kind)
    return (after[0] - before[0]) / max(1.0, after[1] - before[1])


def timed(service: SchedulerService, post: Callable[[], None]) -> float:
    began = time.perf_counter()
    post()
    service.drain(600)
    return time.perf_counter() - began


def run_supervisor(engine: Engine, set_id: int, claim: str, now: datetime) -> None:
    """What a supervisor writes for a set that runs and passes."""
    with transaction(engine) as repo:
        repo.supervisors.confirm_claim(set_id, claim, 4242, "bench", now=now)
        for recipe in repo.jobs.get_recipe_set(set_id).recipes:
            for state in RUN:
                repo.moves.move_recipe(recipe.id, state, now=now)


def measure(url: str, sets: int, repeat: int, profile: str | None) -> dict[str, float]:
    upgrade(url)
    engine = make_engine(url)
    lab(engine, sets)
    clock = Clock()
    dispatcher = RecordingDispatcher()
    settings = Settings(consistency_every=86400)
    service = SchedulerService.elected(engine, settings, dispatcher, holder="bench", clock=clock)
    service.start()
    out = {"raw": raw_rate(engine, sets)}
    job = submit(engine, sets, clock())
    placing = cProfile.Profile() if profile == "place" else None
    if placing is not None:
        placing.enable()
    out["place"] = sets / timed(service, lambda: service.post(JobSubmitted(job)))
    if placing is not None:
        placing.disable()
        pstats.Stats(placing).sort_stats("tottime").print_stats(30)
    assert len(dispatcher.started) == sets, "every set was placed in the one event"
    queued = [submit(engine, 1, clock()) for _ in range(repeat)]
    submitting = cProfile.Profile() if profile == "submit" else None
    if submitting is not None:
        submitting.enable()
    before = decided("submit")
    samples = [timed(service, lambda j=j: service.post(JobSubmitted(j))) for j in queued]  # type: ignore[misc]
    out["submit decided"] = mean_since("submit", before)
    if submitting is not None:
        submitting.disable()
        pstats.Stats(submitting).sort_stats("cumulative").print_stats(40)
    out["submit"] = statistics.median(samples)
    burst = [submit(engine, 1, clock()) for _ in range(repeat * 4)]
    burst_s = timed(service, lambda: [service.post(JobSubmitted(j)) for j in burst])
    out["burst"] = burst_s / len(burst)
    ends = []
    before = decided("finished")
    profiler = cProfile.Profile() if profile == "finish" else None
    for set_id in list(dispatcher.started[:repeat]):
        claim = dispatcher.claims[set_id]
        run_supervisor(engine, set_id, claim, clock())
        if profiler is not None:
            profiler.enable()
        exited = SupervisorExited(set_id, 0, claim)
        ends.append(timed(service, lambda e=exited: service.post(e)))  # type: ignore[misc]
        if profiler is not None:
            profiler.disable()
    out["finish"] = statistics.median(ends)
    out["finish decided"] = mean_since("finished", before)
    service.stop()
    engine.dispose()
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sets", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--db", default="sqlite,postgres")
    parser.add_argument("--profile", choices=("place", "submit", "finish"), default=None)
    args = parser.parse_args()
    print(
        f"{'database':10} {'raw rows/s':>11} {'placements/s':>13} {'of raw':>7}"
        f" {'submit ms':>10} {'decided':>8} {'in a burst':>10} {'finish ms':>10} {'decided':>8}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.db.split(","):
            with database(kind, Path(tmp)) as url:
                got = measure(url, args.sets, args.repeat, args.profile)
            print(
                f"{kind:10} {got['raw']:>11,.0f} {got['place']:>13,.0f}"
                f" {got['place'] / got['raw']:>7.1%} {got['submit'] * 1000:>10.1f}"
                f" {got['submit decided'] * 1000:>8.1f} {got['burst'] * 1000:>10.2f}"
                f" {got['finish'] * 1000:>10.1f} {got['finish decided'] * 1000:>8.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
