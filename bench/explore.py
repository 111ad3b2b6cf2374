"""Explore every order of events on a larger small lab (not a test: run it by hand).

    .venv/bin/python bench/explore.py [--horizon 1] [--max-states 1000000] [--write DIR]

Four systems in two labs, two pools with group caps, five recipe sets of width
1 to 3 with different priorities, groups and ``max_time``s (one with a retry),
a broken system and its repair, a cancel and a priority change, each at any
instant up to the horizon; then four instants in which running sets end. Prints
the states explored, the transitions, the time and states per second, the
liveness figures, and every broken invariant with its shortest event sequence
(``--write DIR``: each also as a ``labq sim`` scenario).

The reference measured in the same run is one *step*: unpickling a point of
the lab and letting one event happen to it, the least an explored state costs;
the cost of a state is given as a multiple of it.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from labq.domain.priority import Priority
from labq.domain.states import Condition
from labq.sim.explore.lab import Lab, job, systems
from labq.sim.explore.point import Event, apply, initial, pack, unpack
from labq.sim.explore.search import explore
from labq.sim.explore.writer import write

POOLS = [
    {"name": "team", "access": {"qa": "high", "kernel": "low"}},
    {"name": "open"},
]


def lab(horizon: int) -> Lab:
    """The bench's lab."""
    return Lab(
        "bench",
        {
            "pools": POOLS,
            "systems": systems("east", ["e1", "e2"], pools=["team"])
            + systems("west", ["w1", "w2"], pools=["open"]),
            "jobs": [
                job("short", 1, group="qa", max_time=1, max_retries=1),
                job("triple", 3, group="qa", priority="high", max_time=2),
                job("kernel", 2, group="kernel", priority="urgent"),
                job("pair", 2, max_time=1),
                job("late", 1, group="kernel", priority="low"),
            ],
        },
        horizon=horizon,
        conditions=(("w1", Condition.BROKEN), ("w1", Condition.AUTOMATED)),
        cancels=("triple",),
        priorities=(("late", Priority.URGENT),),
        aborts=("short",),
    )


def step_time(explored: Lab, rounds: int = 200) -> float:
    """Seconds of one step: unpickle a point with two sets submitted, submit a third."""
    point, context = initial(explored)
    for name in ("short", "triple"):
        apply(point, Event("submit", name), context)
    blob = pack(point)
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        copy = unpack(blob)
        apply(copy, Event("submit", "kernel"), context)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--horizon", type=int, default=1)
    parser.add_argument("--max-states", type=int, default=1_000_000)
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    explored = lab(args.horizon)
    step = step_time(explored)
    result = explore(explored, max_states=args.max_states)
    per_state = result.seconds / max(result.states, 1)
    print(f"lab {explored.name}, horizon {args.horizon}, drain {explored.drain}")
    print(f"states {result.states}, transitions {result.transitions}, complete {result.complete}")
    print(f"time {result.seconds:.1f} s, {result.rate:.0f} states/s")
    print(f"reference step {step * 1e3:.2f} ms; one state costs {per_state / step:.1f} steps")
    print(f"quiescent {result.quiescent}, drained {result.drained}, undrained {result.undrained}")
    print(f"findings {len(result.findings)}")
    for index, finding in enumerate(result.findings):
        print(finding)
        if args.write is not None:
            args.write.mkdir(parents=True, exist_ok=True)
            print("  written:", write(explored, finding, args.write / f"finding-{index}.yaml"))


if __name__ == "__main__":
    main()
