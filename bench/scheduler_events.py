"""Event latency of the scheduling core at lab scale (not a test: run it by hand).

    .venv/bin/python bench/scheduler_events.py [--systems 10000] [--queued 100000]
        [--signatures 1000] [--events 2000] [--distros]

Builds a lab of SYSTEMS systems, fills every system with a running set, queues
QUEUED single-recipe sets spread over SIGNATURES distinct host requirements,
then times EVENTS pending-system events (a running set finishes, its system is
offered to the queue) and EVENTS new-job events, and prints median and p99.
``--distros``: every lab carries distro trees (most of four families, for each arch)
and every queued set needs one of the families (docs/performance.md, "Distro trees
in the index").
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from labq.domain.priority import Priority
from labq.domain.requirements import Requirement, parse
from labq.domain.states import RecipeState
from labq.scheduler import decisions as d
from labq.scheduler.core import Scheduler
from labq.scheduler.entries import RecipeSubmission, SchedulerConfig, SetSubmission, SystemEntry

TYPES = 40
LABS = 10


def lab_systems(n: int, rng: random.Random) -> list[SystemEntry]:
    out = []
    for i in range(n):
        lab = f"lab{i % LABS}"
        facts = {
            "fqdn": f"s{i}.{lab}",
            "lab": lab,
            "arch": rng.choice(["x86_64", "aarch64", "ppc64le"]),
            "machine_type": f"type{rng.randrange(TYPES)}",
            "memory_mb": rng.choice([8192, 16384, 65536, 262144]),
            "pool": frozenset({f"pool{rng.randrange(5)}"}),
        }
        out.append(SystemEntry(f"s{i}.{lab}", lab, facts, frozenset(facts["pool"])))  # type: ignore[arg-type]
    return out


def signatures(n: int, rng: random.Random) -> list[Requirement]:
    seen: dict[str, Requirement] = {}
    while len(seen) < n:
        native = {
            "machine_type": f"type{rng.randrange(TYPES)}",
            "memory_mb": {">=": rng.choice([4096, 8192, 16384, 32768, 65536])},
        }
        if rng.random() < 0.5:
            native["arch"] = rng.choice(["x86_64", "aarch64", "ppc64le"])
        if rng.random() < 0.3:
            native["lab"] = f"lab{rng.randrange(LABS)}"
        seen[str(sorted(native.items(), key=str))] = parse(native)
    return list(seen.values())


FAMILIES = ("RedHatEnterpriseLinux9", "RedHatEnterpriseLinux8", "Fedora40", "CentOSStream9")
ARCHES = ("x86_64", "aarch64", "ppc64le")


def lab_trees(rng: random.Random) -> dict[str, list[Any]]:
    """Per lab, trees of most families for every arch; each family carried somewhere."""
    from labq.domain.distro import DistroTree  # here: without --distros, runs on older cores

    out: dict[str, list[Any]] = {}
    for i in range(LABS):
        lab = f"lab{i}"
        families = [
            f for j, f in enumerate(FAMILIES) if j == i % len(FAMILIES) or rng.random() < 0.6
        ]
        out[lab] = [
            DistroTree(lab=lab, name=f"{family}-{arch}", arch=arch, family=family)
            for family in families
            for arch in ARCHES
        ]
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--systems", type=int, default=10_000)
    parser.add_argument("--queued", type=int, default=100_000)
    parser.add_argument("--signatures", type=int, default=1000)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--distros", action="store_true")
    args = parser.parse_args()
    rng = random.Random(7)
    core = Scheduler(SchedulerConfig(aging_bump_after=3600.0))
    wanted: list[Any] = [None]
    if args.distros:
        from labq.domain.distro import DistroRequirement

        for lab, trees in lab_trees(random.Random(11)).items():
            core.set_trees(lab, trees, 0.0)
        wanted = [DistroRequirement.of({"family": f}) for f in FAMILIES]
    ids = iter(range(1, 10**9))
    now = 0.0
    setup = time.perf_counter()
    running: list[tuple[int, int]] = []
    for system in lab_systems(args.systems, rng):
        core.add_system(system, now)
        sid, rid = next(ids), next(ids)
        pin = parse({"fqdn": system.fqdn})
        core.submit([SetSubmission(sid, sid, (RecipeSubmission(rid, pin),), submitted=now)], now)
        running.append((sid, rid))
    reqs = signatures(args.signatures, rng)

    def new_set(at: float) -> SetSubmission:
        sid, rid = next(ids), next(ids)
        priority = rng.choice(list(Priority))
        distro = wanted[(sid // 2) % len(wanted)]  # ids go by two: every family in turn
        extra = {} if distro is None else {"distro": distro}
        recipe = RecipeSubmission(rid, rng.choice(reqs), **extra)
        return SetSubmission(sid, sid, (recipe,), priority=priority, submitted=at)

    for i in range(args.queued):
        core.submit([new_set(i * 0.01)], i * 0.01)
    now = args.queued * 0.01
    print(
        f"setup: {args.systems} systems, {args.queued} queued sets, "
        f"{len(core.index.classes)} classes in {time.perf_counter() - setup:.1f} s"
    )
    met = [len(core.index.classes_of.get(f, ())) for f in core.systems]
    print(f"classes a system meets: mean {statistics.mean(met):.0f}, max {max(met)}")

    pending_times, new_times, started = [], [], 0
    rng.shuffle(running)
    for _ in range(args.events):
        now += 1.0
        sid, rid = running.pop()
        t0 = time.perf_counter()
        out = core.finish(sid, {rid: RecipeState.COMPLETED}, now)
        pending_times.append(time.perf_counter() - t0)
        for decision in out:
            if isinstance(decision, d.Start):
                started += 1
                entry = core.sets[decision.set]
                running.insert(0, (entry.id, entry.recipes[0].id))
        t0 = time.perf_counter()
        core.submit([new_set(now)], now)
        new_times.append(time.perf_counter() - t0)
    for name, values in (("pending-system", pending_times), ("new-job", new_times)):
        print(
            f"{name:15s} events: {len(values)}  median {statistics.median(values) * 1e3:.3f} ms"
            f"  p99 {percentile(values, 0.99) * 1e3:.3f} ms  max {max(values) * 1e3:.3f} ms"
        )
    print(f"sets started by the pending-system events: {started}")


if __name__ == "__main__":
    main()
