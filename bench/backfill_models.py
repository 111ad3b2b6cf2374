"""Backfill policies in a counting model of one homogeneous machine (not a test: by hand).

    .venv/bin/python bench/backfill_models.py [--limit J] [TRACE] [POLICY ...]

POLICY is ``easy`` (one reservation: the head of the queue), ``depth=K`` (the
first K sets that cannot start get reservations, the others backfill around
them: K=1 is EASY, a large K is conservative backfilling), optionally with
``order=sjf`` (backfill candidates shortest first instead of in queue order).
Declared times are the run times, as in ``bench/sim_traces.py``.

This is a model, not labq: nodes are counted rather than named and a pass
looks at the whole queue at every arrival and end. Its EASY gives labq's
schedule on lublin_256 to within ties, and a lublin run takes a second, so it
is where a policy is tried before the core is changed (docs/performance.md §
Backfill against EASY).
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import heapq
import math
import time
from dataclasses import dataclass
from pathlib import Path

TAU = 10.0  # seconds: the bound of the bounded slowdown
# the shared traces sit beside the repository
LUBLIN = str(Path(__file__).resolve().parents[1].parent / "shared" / "traces" / "lublin_256.swf.gz")


@dataclass(frozen=True)
class Job:
    submit: float
    runtime: float
    nodes: int


def load(path: str) -> tuple[int, list[Job]]:
    """The machine's size (MaxNodes, else MaxProcs) and the jobs labq would keep."""
    size = 0
    jobs = []
    with gzip.open(path, "rt") as handle:
        for line in handle:
            if line.startswith(";"):
                key, _, value = line[1:].partition(":")
                if key.strip() in ("MaxNodes", "MaxProcs") and not size:
                    size = int(value.split()[0])
                continue
            fields = [float(f) for f in line.split()]
            if len(fields) == 18:
                nodes = int(fields[4]) if fields[4] > 0 else int(fields[7])
                jobs.append(Job(fields[1], fields[3], nodes))
    return size, [j for j in jobs if j.runtime > 0 and 0 < j.nodes <= size]


class Profile:
    """Free nodes over time: ``free[i]`` holds on ``[times[i], times[i+1])``."""

    def __init__(self, now: float, size: int, running: list[tuple[float, int]]) -> None:
        self.times, self.free = [now], [size - sum(n for _, n in running)]
        for end, nodes in sorted(running):
            if end <= self.times[-1]:
                self.free[-1] += nodes
            else:
                self.times.append(end)
                self.free.append(self.free[-1] + nodes)

    def fits(self, start: float, length: float, nodes: int) -> bool:
        i = bisect.bisect_right(self.times, start) - 1
        while i < len(self.times) and self.times[i] < start + length:
            if self.free[i] < nodes:
                return False
            i += 1
        return True

    def soonest(self, length: float, nodes: int) -> float:
        for i, start in enumerate(self.times):
            if self.free[i] >= nodes and self.fits(start, length, nodes):
                return start
        return math.inf

    def take(self, start: float, length: float, nodes: int) -> None:
        end = start + length
        for at in (start, end):
            i = bisect.bisect_right(self.times, at) - 1
            if self.times[i] != at:
                self.times.insert(i + 1, at)
                self.free.insert(i + 1, self.free[i])
        i = bisect.bisect_left(self.times, start)
        while i < len(self.times) and self.times[i] < end:
            self.free[i] -= nodes
            i += 1


def schedule(size: int, jobs: list[Job], depth: int, shortest_first: bool) -> list[float]:
    """Start times: at every arrival and end, the queue in order gets reservations until
    ``depth`` are made (a set that fits now starts), and the rest start if they fit now."""
    arrivals = sorted(range(len(jobs)), key=lambda j: (jobs[j].submit, j))
    queue: list[int] = []
    running: list[tuple[float, int]] = []  # heap of (end, nodes)
    starts = [math.nan] * len(jobs)
    next_arrival = 0
    while next_arrival < len(arrivals) or queue:
        arrival = jobs[arrivals[next_arrival]].submit if next_arrival < len(arrivals) else math.inf
        now = min(arrival, running[0][0] if running else math.inf)
        while running and running[0][0] <= now:
            heapq.heappop(running)
        while next_arrival < len(arrivals) and jobs[arrivals[next_arrival]].submit <= now:
            queue.append(arrivals[next_arrival])
            next_arrival += 1
        profile = Profile(now, size, running)
        reserved, rest = 0, []
        for j in queue:
            job = jobs[j]
            if reserved < depth:
                at = profile.soonest(job.runtime, job.nodes)
                profile.take(at, job.runtime, job.nodes)
                if at <= now:
                    starts[j] = now
                else:
                    reserved += 1
            else:
                rest.append(j)
        for j in sorted(rest, key=lambda j: jobs[j].runtime) if shortest_first else rest:
            job = jobs[j]
            if job.nodes <= profile.free[0] and profile.fits(now, job.runtime, job.nodes):
                profile.take(now, job.runtime, job.nodes)
                starts[j] = now
        for j in queue:
            if starts[j] == now:
                heapq.heappush(running, (now + jobs[j].runtime, jobs[j].nodes))
        queue = [j for j in queue if math.isnan(starts[j])]
    return starts


def report(size: int, jobs: list[Job], starts: list[float]) -> str:
    waits = [s - j.submit for s, j in zip(starts, jobs, strict=True)]
    slowdowns = [
        max(1.0, (w + j.runtime) / max(j.runtime, TAU)) for w, j in zip(waits, jobs, strict=True)
    ]
    first = min(j.submit for j in jobs)
    last = max(s + j.runtime for s, j in zip(starts, jobs, strict=True))
    work = sum(j.runtime * j.nodes for j in jobs)
    return (
        f"mean wait {sum(waits) / len(waits) / 3600:6.1f} h  max wait {max(waits) / 3600:6.1f} h"
        f"  mean bsld {sum(slowdowns) / len(slowdowns):8.2f}"
        f"  util {work / (size * (last - first)):7.2%}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace", nargs="?", default=LUBLIN)
    parser.add_argument("policies", nargs="*", default=["easy", "depth=32", "depth=100000"])
    parser.add_argument("--limit", type=int)
    args = parser.parse_args()
    size, jobs = load(args.trace)
    jobs = jobs[: args.limit] if args.limit else jobs
    for policy in args.policies:
        options = dict(p.split("=") for p in policy.split(",") if "=" in p)
        began = time.perf_counter()
        starts = schedule(size, jobs, int(options.get("depth", 1)), options.get("order") == "sjf")
        took = time.perf_counter() - began
        print(f"{policy:24} {report(size, jobs, starts)}  ({took:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
