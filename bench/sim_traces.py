"""Time ``labq sim`` over the shared SWF traces, per policy, and print jobs per second.

    .venv/bin/python bench/sim_traces.py [--limit J] [--policies labq,easy] [TRACE ...]

Traces default to /work/shared/traces/*.swf.gz. Loading and measuring are timed
apart from simulating, since the simulation is what policies change.
"""

from __future__ import annotations

import argparse
import glob
import time

from labq.sim.metrics import measure, stuck
from labq.sim.runner import simulate
from labq.sim.swf import load_swf

DEFAULT_POLICIES = "labq,easy,teuthology-dispatcher,teuthology-workers"


def main() -> None:
    """Run every policy over every trace and print one line each."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("traces", nargs="*")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--estimate", default="runtime")
    parser.add_argument("--policies", default=DEFAULT_POLICIES)
    args = parser.parse_args()
    traces = args.traces or sorted(glob.glob("/work/shared/traces/*.swf.gz"))
    print(
        f"{'trace':34} {'policy':22} {'jobs':>6} {'load s':>7} {'sim s':>7} {'jobs/s':>8}"
        f" {'metrics s':>9} {'mean wait h':>11} {'util':>6} {'stuck':>5}"
    )
    for trace in traces:
        began = time.perf_counter()
        scenario = load_swf(trace, nodes=None, limit=args.limit, estimate=args.estimate)
        loaded = time.perf_counter() - began
        for policy in args.policies.split(","):
            began = time.perf_counter()
            run = simulate(scenario, {}, policy, 0)
            simulated = time.perf_counter() - began
            began = time.perf_counter()
            metrics = measure(run.world)
            stuck_sets = len(stuck(run.world))
            measured = time.perf_counter() - began
            jobs = len(scenario.jobs)
            print(
                f"{trace.rsplit('/', 1)[-1]:34} {policy:22} {jobs:>6} {loaded:>7.1f}"
                f" {simulated:>7.1f} {jobs / simulated:>8.0f} {measured:>9.1f}"
                f" {metrics.mean_wait / 3600:>11.1f} {metrics.utilization:>6.1%} {stuck_sets:>5}",
                flush=True,
            )


if __name__ == "__main__":
    main()
