"""Lock waiting and makespan under ``labq`` and ``labq-fifo`` over random contended workloads.

    .venv/bin/python bench/contended_locks.py [--seeds N] [--policies labq,labq-fifo]
                                              [--families half,mixed]

Each workload is one lab of 12 systems with a running limit of 4 (the limit,
not the systems, is what sets wait for) and one-recipe jobs. Two families:

- *half* (issue 11): half the sets need ``storage:nfs1`` exclusively (60–240 s),
  the other half need no lock (60–600 s);
- *mixed*: backups that need ``storage:nfs1`` exclusively, builds that need
  nothing, readers that declare ``storage`` shared without names and take
  ``nfs1`` shared at run time, network tests that need ``network:vlan7``
  exclusively, and the odd whole-lab upgrade.

Each in two regimes: *steady* (30 jobs arriving over 20 minutes) and *burst*
(40 jobs within one minute). Prints one line per family, regime and policy:
in how many workloads the policy waited least for locks (*least*) and finished
first (*first*; ties count for both), and sums over the workloads (hours).
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from labq.sim.metrics import lock_waits, measure, stuck
from labq.sim.runner import simulate
from labq.sim.scenario import parse_scenario

NFS_X: dict[str, Any] = {"storage": {"exclusive": ["nfs1"]}}
# kind: (locks, duration, lock plan, weight in the mix)
KINDS: dict[str, tuple[dict[str, Any], float, list[dict[str, Any]], int]] = {
    "backup": (NFS_X, 240, [], 4),
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
REGIMES = {"steady": (30, 1200.0), "burst": (40, 60.0)}  # jobs, arrival window (s)
FAMILIES = ("half", "mixed")


def workload(seed: int, jobs: int, window: float, family: str = "mixed") -> dict[str, Any]:
    """One random contended workload of ``family`` as scenario data."""
    rng = random.Random(seed)
    names = list(KINDS)
    weights = [KINDS[k][3] for k in names]
    out = []
    for i in range(jobs):
        if family == "half":
            kind, locks, plan = ("lock", NFS_X, []) if i % 2 else ("free", {}, [])
            duration = round(rng.uniform(60, 240) if i % 2 else rng.uniform(60, 600))
        else:
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
    """Run every policy over every workload; one summary line per family, regime and policy."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--policies", default="labq,labq-fifo")
    parser.add_argument("--families", default=",".join(FAMILIES))
    args = parser.parse_args()
    policies = args.policies.split(",")
    print(
        f"{'family':6} {'regime':6} {'policy':10} {'least':>5} {'first':>5} {'lock wait h':>11}"
        f" {'queue wait h':>12} {'makespan h':>10} {'stuck':>5} {'sim s':>6}"
    )
    for family in args.families.split(","):
        for regime, (jobs, window) in REGIMES.items():
            _regime(family, regime, jobs, window, policies, args.seeds)


def _regime(
    family: str, regime: str, jobs: int, window: float, policies: list[str], seeds: int
) -> None:
    """Every policy over ``seeds`` workloads of one family and regime: one line per policy."""
    totals = {p: [0.0, 0.0, 0.0, 0, 0.0] for p in policies}
    least = {p: [0, 0] for p in policies}  # workloads where it waited least, finished first
    for seed in range(seeds):
        data = workload(seed, jobs, window, family)
        scenario = parse_scenario(data, source=f"{family}-{regime}-{seed}")
        waited, makespan = {}, {}
        for policy in policies:
            began = time.perf_counter()
            world = simulate(scenario, {}, policy, seed).world
            spent = time.perf_counter() - began
            metrics = measure(world)
            waited[policy] = lock_waits(world).total
            makespan[policy] = metrics.makespan
            row = totals[policy]
            row[0] += waited[policy]
            row[1] += metrics.mean_wait * (metrics.started + metrics.stuck)  # stuck sets count
            row[2] += metrics.makespan
            row[3] += len(stuck(world))
            row[4] += spent
        for policy in policies:  # ties count for both
            least[policy][0] += waited[policy] == min(waited.values())
            least[policy][1] += makespan[policy] == min(makespan.values())
    for policy in policies:
        lock, queue, span, stuck_sets, spent = totals[policy]
        print(
            f"{family:6} {regime:6} {policy:10} {least[policy][0]:>5} {least[policy][1]:>5}"
            f" {lock / 3600:>11.1f} {queue / 3600:>12.1f} {span / 3600:>10.1f}"
            f" {stuck_sets:>5} {spent:>6.1f}"
        )


if __name__ == "__main__":
    main()
