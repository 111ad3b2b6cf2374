"""Run policies over the shared SWF traces: schedule quality and simulation wall time.

    .venv/bin/python bench/sim_traces.py [--limit J] [--policies labq,easy] [--config FILE]
                                         [TRACE ...]

For each trace and policy: mean and max wait, mean bounded slowdown (tau = 10 s),
utilisation, stuck sets and the wall time of the simulation alone (loading and
measuring are timed apart). Then, per trace, labq's figures as ratios to
EASY's measured in the same run. Traces default to ``../shared/traces/*.swf.gz`` beside
the repository; ``--config`` lays a scenario ``config`` section over labq's defaults.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # where ../shared is: tests/realjobs

from tests.realjobs import TRACES

from labq.sim.metrics import Metrics, measure, stuck
from labq.sim.runner import simulate
from labq.sim.scenario import with_config
from labq.sim.swf import load_swf

DEFAULT_POLICIES = "labq,easy,teuthology-dispatcher,teuthology-workers"
HEADER = (
    f"{'trace':24} {'policy':22} {'jobs':>6} {'mean wait h':>11} {'max wait h':>10}"
    f" {'mean bsld':>10} {'util':>7} {'stuck':>5} {'wall s':>7}"
)


def main() -> None:
    """Run every policy over every trace and print one line each, then the ratios."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("traces", nargs="*")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--estimate", default="runtime")
    parser.add_argument("--policies", default=DEFAULT_POLICIES)
    parser.add_argument("--config", default=None)
    args = parser.parse_args()
    traces = args.traces or sorted(str(p) for p in TRACES.glob("*.swf.gz"))
    if not traces:
        parser.error(f"no traces in {TRACES}: name the trace files")
    print(HEADER)
    for trace in traces:
        scenario = load_swf(trace, nodes=None, limit=args.limit, estimate=args.estimate)
        if args.config:
            scenario = with_config(scenario, args.config)
        found: dict[str, tuple[Metrics, float]] = {}
        for policy in args.policies.split(","):
            began = time.perf_counter()
            run = simulate(scenario, {}, policy, 0)
            wall = time.perf_counter() - began
            metrics = measure(run.world)
            found[policy] = (metrics, wall)
            print(
                f"{trace.rsplit('/', 1)[-1][:24]:24} {policy:22} {len(scenario.jobs):>6}"
                f" {metrics.mean_wait / 3600:>11.1f} {metrics.max_wait / 3600:>10.1f}"
                f" {metrics.mean_bounded_slowdown:>10.2f} {metrics.utilization:>7.2%}"
                f" {len(stuck(run.world)):>5} {wall:>7.1f}",
                flush=True,
            )
        if "labq" in found and "easy" in found:
            print(_ratios(found["labq"], found["easy"]), flush=True)


def _ratios(labq: tuple[Metrics, float], easy: tuple[Metrics, float]) -> str:
    (ours, our_wall), (theirs, their_wall) = labq, easy
    slowdown = _ratio(ours.mean_bounded_slowdown, theirs.mean_bounded_slowdown)
    return (
        f"  labq / easy: mean bsld {slowdown},"
        f" max wait {_ratio(ours.max_wait, theirs.max_wait)},"
        f" utilisation {ours.utilization - theirs.utilization:+.2%} points,"
        f" wall time {_ratio(our_wall, their_wall)}"
    )


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}x" if b else "n/a"


if __name__ == "__main__":
    main()
