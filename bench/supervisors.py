"""What a running set's supervisor costs, spawned or forked (not a test: run it by hand).

    .venv/bin/python bench/supervisors.py [--sets 100] [--held 20] [--db sqlite,postgres]
        [--idle 10] [--mode pidns,group]

For each database and containment mode, in one run, with the real dispatcher and
real supervisors on the local backend, both ways of starting a supervisor —
``spawn`` (``python -m labq.dispatch.supervisor``, the reference) and ``fork``
(forked by the fork server):

- ``sets/s``: SETS sets whose one task is ``true``, started back to back with
  ``Dispatcher.start``; sets started, run and reported ended per second (from
  the first start to the last ``on_finished``); ``start/s``: how fast those
  ``Dispatcher.start`` calls returned (supervisors launched per second);
- ``start ms``: median time from ``Dispatcher.start`` to the supervisor having
  taken the set up (its recipes' move to ``waiting``, as the database records it),
  for IDLE sets started one at a time (nothing else running); ``in burst``: the
  same, for the sets of the burst above;
- ``USS MB``: HELD sets whose task waits, all running at once: the mean unshared
  memory (Private_Clean + Private_Dirty of ``/proc/PID/smaps_rollup``) of one set's
  supervisor processes (the supervisor, and ``unshare`` or the fork server's keeper
  in front of it in ``pidns`` mode; not the task). ``PSS MB`` counts the shared pages
  too, split between their sharers; ``server RSS MB`` is the fork server's resident
  memory (one per server; most of it is the pages its supervisors share).

One warm-up set runs first each time. PostgreSQL is LABQ_TEST_PG_URL (a
database is made and dropped), with its raw batched-update rate beside it, as
``bench/persistence.py`` measures it.
"""

from __future__ import annotations

import argparse
import queue
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.persistence import database, lab, raw_rate
from labq.config import Settings
from labq.dispatch import containment
from labq.dispatch.dispatcher import Dispatcher
from labq.domain.job import JobSpec
from labq.domain.states import RecipeState
from labq.store import make_engine, reading, transaction, upgrade

WAYS = ("spawn", "fork")


class Ends:
    """``on_finished`` calls, as a queue."""

    def __init__(self) -> None:
        self.calls: queue.Queue[tuple[int, int | None]] = queue.Queue()
        self.failed = 0  # supervisors that exited other than 0 (printed: the run still counts)

    def __call__(self, set_id: int, code: int | None, claim: str) -> None:
        self.calls.put((set_id, code))

    def wait(self, count: int, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        for _ in range(count):
            set_id, code = self.calls.get(timeout=max(0.1, deadline - time.monotonic()))
            if code not in (0, None):
                print(f"  set {set_id}'s supervisor exited {code}", flush=True)
                self.failed += 1


class Sets:
    """Started, claimed sets on the lab's systems, one system each."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.next_system = 0

    def make(self, count: int, run: str) -> list[tuple[int, str]]:
        spec = JobSpec.model_validate(
            {"recipe_sets": [{"recipes": [{"tasks": [{"name": "t", "run": run}]}]}] * count}
        )
        now = datetime.now(UTC)
        out = []
        with transaction(self.engine) as repo:
            job_id = repo.queue.submit_job(spec, owner="alice", now=now, source_format="native")
            for view in repo.jobs.load_job(job_id).sets:
                fqdn = f"s{self.next_system}.lab1"
                self.next_system += 1
                repo.moves.move_recipe(
                    view.recipes[0].id, RecipeState.SCHEDULED, now=now, system=fqdn
                )
                repo.supervisors.start_recipe_set(view.id, lab="lab1", now=now)
                claim = f"bench-{view.id}-{time.monotonic_ns()}"
                assert repo.supervisors.claim_set(view.id, claim, now=now)
                out.append((view.id, claim))
        return out

    def taken_up(self, set_id: int) -> datetime:
        """When the supervisor moved the set's recipe to ``waiting``."""
        with reading(self.engine) as repo:
            recipe = repo.jobs.get_recipe_set(set_id).recipes[0]
            entries = repo.moves.recipe_history(recipe.id)
        at = next(e.at for e in entries if e.state is RecipeState.WAITING)
        return at if at.tzinfo else at.replace(tzinfo=UTC)


def memory(pid: int) -> tuple[float, float]:
    """Unshared and proportional memory of one process, in MB."""
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value = line.split(":", 1)
        fields[name] = int(value.split()[0])
    uss = fields["Private_Clean"] + fields["Private_Dirty"]
    return uss / 1024, fields["Pss"] / 1024


def rss(pid: int) -> float:
    """Resident memory of one process, shared pages included, in MB."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        if line.startswith("Rss:"):
            return int(line.split()[1]) / 1024
    return 0.0


def supervisor_processes(root: int) -> list[int]:
    """``root`` and its descendants that are supervisors, unshare or a keeper (not tasks)."""
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if b"labq.dispatch.supervisor" in args or args[0].endswith(b"unshare"):
            out.append(pid)
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
    return out


def parent(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rfind(")") + 2 :].split()[1])


@contextmanager
def dispatching(
    url: str, data_dir: Path, way: str, mode: containment.Mode, ends: Ends
) -> Iterator[Dispatcher]:
    settings = Settings(data_dir=str(data_dir))
    d = Dispatcher(url, settings, ends, mode=mode, forking=way == "fork", poll_every=0.1)
    try:
        yield d
    finally:
        d.shutdown()


def measure(
    url: str, root: Path, way: str, mode: containment.Mode, n: int, held: int, idle: int
) -> dict[str, float]:
    engine = make_engine(url)
    sets = Sets(engine)
    ends = Ends()
    out: dict[str, float] = {}
    with dispatching(url, root / f"data-{way}-{mode}", way, mode, ends) as d:
        for set_id, claim in sets.make(1, "true"):  # warm-up
            d.start(set_id, claim)
        ends.wait(1)
        delays = []
        for set_id, claim in sets.make(idle, "true"):
            began_at = datetime.now(UTC)
            d.start(set_id, claim)
            ends.wait(1)
            delays.append((sets.taken_up(set_id) - began_at).total_seconds())
        out["idle"] = statistics.median(delays)
        burst = sets.make(n, "true")
        began = time.perf_counter()
        started_at = {}
        for set_id, claim in burst:
            started_at[set_id] = datetime.now(UTC)
            d.start(set_id, claim)
        out["launch"] = n / (time.perf_counter() - began)
        ends.wait(n)
        out["rate"] = n / (time.perf_counter() - began)
        delays = [
            (sets.taken_up(s) - started_at[s]).total_seconds()
            for s, _ in burst
            if _taken_up(engine, s)
        ]
        out["burst"] = statistics.median(delays)

        gate = root / f"gate-{way}-{mode}"
        waiting = sets.make(held, f"while [ ! -e {gate} ]; do sleep 0.2; done")
        pids = [d.start(set_id, claim) for set_id, claim in waiting]
        while not all(_running(engine, s) for s, _ in waiting):
            time.sleep(0.1)
        per_set = [[memory(p) for p in supervisor_processes(pid)] for pid in pids]
        out["uss"] = statistics.mean(sum(u for u, _ in s) for s in per_set)
        out["pss"] = statistics.mean(sum(p for _, p in s) for s in per_set)
        out["server_rss"] = rss(parent(pids[0])) if way == "fork" else 0.0
        gate.touch()
        ends.wait(held)
    engine.dispose()
    return out


def _taken_up(engine: Engine, set_id: int) -> bool:
    with reading(engine) as repo:
        return repo.jobs.get_recipe_set(set_id).supervisor_pid is not None


def _running(engine: Engine, set_id: int) -> bool:
    with reading(engine) as repo:
        view = repo.jobs.get_recipe_set(set_id)
    return any(t.status == "running" for r in view.recipes for t in r.tasks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sets", type=int, default=100)
    parser.add_argument("--held", type=int, default=20)
    parser.add_argument("--idle", type=int, default=10)
    parser.add_argument("--db", default="sqlite,postgres")
    parser.add_argument("--mode", default=containment.available_mode())
    args = parser.parse_args()
    print(
        f"{'database':9} {'raw rows/s':>10} {'mode':6} {'way':6} {'start/s':>8} {'sets/s':>7}"
        f" {'×spawn':>7}"
        f" {'start ms':>9} {'in burst':>9} {'USS MB':>7} {'×spawn':>7} {'PSS MB':>7}"
        f" {'server RSS MB':>13}"
    )
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        for kind in args.db.split(","):
            for mode in args.mode.split(","):
                root = Path(tmp) / f"{kind}-{mode}"
                root.mkdir()
                with database(kind, root) as url:
                    upgrade(url)
                    engine = make_engine(url)
                    lab(engine, 2 * (1 + args.idle + args.sets + args.held))
                    raw = raw_rate(engine, 1000)
                    engine.dispose()
                    counts = (args.sets, args.held, args.idle)
                    got = {w: measure(url, root, w, mode, *counts) for w in WAYS}
                for way in WAYS:
                    g, ref = got[way], got["spawn"]
                    print(
                        f"{kind:9} {raw:>10,.0f} {mode:6} {way:6} {g['launch']:>8.1f}"
                        f" {g['rate']:>7.1f}"
                        f" {g['rate'] / ref['rate']:>7.2f} {g['idle'] * 1000:>9.0f}"
                        f" {g['burst'] * 1000:>9.0f}"
                        f" {g['uss']:>7.1f} {g['uss'] / ref['uss']:>7.3f} {g['pss']:>7.1f}"
                        f" {g['server_rss']:>13.1f}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
