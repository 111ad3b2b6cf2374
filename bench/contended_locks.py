"""Lock waiting under ``labq`` and ``labq-fifo`` over many random contended workloads.

    .venv/bin/python bench/contended_locks.py [--seeds N] [--policies labq,labq-fifo]

Each workload is one lab of 12 systems with a running limit of 4 and a random
mix of one-recipe jobs: backups that need ``storage:nfs1`` exclusively, builds
that need nothing, readers that declare ``storage`` shared without names and
take ``nfs1`` shared at run time, network tests that need ``network:vlan7``
exclusively, and the odd whole-lab upgrade. Two regimes: *steady* (30 jobs
arriving over 20 minutes) and *backlog* (40 jobs within one minute). Prints one
line per regime: how often each policy waited least, and the sums over seeds.
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from labq.sim.metrics import lock_waits, measure, stuck
from labq.sim.runner import simulate
from labq.sim.scenario import parse_scenario

# kind: (locks, duration, lock plan, weight in the mix)
KINDS: dict[str, tuple[dict[str, Any], float, list[dict[str, Any]], int]] = {
    "backup": ({"storage": {"exclusive": ["nfs1"]}}, 240, [], 4),
    "build": ({}, 120, [], 8),
    "reader": (
        {"storage": {"shared": "unknown"}},
        150,
        [{"lock": "storage:nfs1", "at": 30, "for": 60}],
        5,
    ),
    "net": ({"network": {"exclusive": ["vlan7"]}}, 150, [], 2),
    "upgrade": ({"whole_lab": True}, 180, [], 1),
}
REGIMES = {"steady": (30, 1200.0), "backlog": (40, 60.0)}  # jobs, arrival window (s)


def workload(seed: int, jobs: int, window: float) -> dict[str, Any]:
    """One random contended workload as scenario data."""
    rng = random.Random(seed)
    names = list(KINDS)
    weights = [KINDS[k][3] for k in names]
    out = []
    for i in range(jobs):
        kind = rng.choices(names, weights)[0]
        locks, duration, plan, _ = KINDS[kind]
        recipe: dict[str, Any] = {"duration": duration, "lock_plan": plan}
        out.append(
            {
                "id": f"{kind}-{i:02d}",
                "submit_at": round(rng.uniform(0, window)),
                "recipe_sets": [{"locks": locks, "recipes": [recipe]}],
            }
        )
    return {
        "config": {"queue": {"lab_running_limits": {"lab1": 4}}},
        "labs": ["lab1"],
        "systems": [{"fqdn": "node.lab1", "lab": "lab1", "count": 12}],
        "jobs": out,
    }


def main() -> None:
    """Run every policy over every workload of both regimes; one summary line per regime."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--policies", default="labq,labq-fifo")
    args = parser.parse_args()
    policies = args.policies.split(",")
    print(
        f"{'regime':8} {'policy':10} {'least wait':>10} {'lock wait h':>11}"
        f" {'queue wait h':>12} {'makespan h':>10} {'stuck':>5} {'sim s':>6}"
    )
    for regime, (jobs, window) in REGIMES.items():
        totals = {p: [0.0, 0.0, 0.0, 0, 0.0] for p in policies}
        least = dict.fromkeys(policies, 0)
        for seed in range(args.seeds):
            scenario = parse_scenario(workload(seed, jobs, window), source=f"{regime}-{seed}")
            waited = {}
            for policy in policies:
                began = time.perf_counter()
                world = simulate(scenario, {}, policy, seed).world
                spent = time.perf_counter() - began
                metrics = measure(world)
                waited[policy] = lock_waits(world).total
                row = totals[policy]
                row[0] += waited[policy]
                row[1] += metrics.mean_wait * metrics.started
                row[2] += metrics.makespan
                row[3] += len(stuck(world))
                row[4] += spent
            best = min(waited.values())
            for policy in policies:
                least[policy] += waited[policy] == best
        for policy in policies:
            lock, queue, makespan, stuck_sets, spent = totals[policy]
            print(
                f"{regime:8} {policy:10} {least[policy]:>4} of {args.seeds:<3} {lock / 3600:>11.1f}"
                f" {queue / 3600:>12.1f} {makespan / 3600:>10.1f} {stuck_sets:>5} {spent:>6.1f}"
            )


if __name__ == "__main__":
    main()
