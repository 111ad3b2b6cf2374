"""The scheduling core's event cost with VM providers configured, next to the same run without.

Used by ``bench/vms.py`` (``--vms 0`` runs this part alone). It reuses
``bench/scheduler_events.py``'s lab: SYSTEMS busy systems over ten labs, QUEUED
single-recipe sets over SIGNATURES host requirements, a fifth of them without a
machine type (so a VM of the right size fits them too). The same queue, from the
same seed, runs twice: once as it is, once with every lab given a provider's quota
cut into VM slots (:func:`labq.scheduler.vms.vm_slots`). Then EVENTS pending-system
events (a running set — on a machine or a VM — finishes, its system is offered to
the queue) and as many new-job events are timed in each run.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass

from bench.scheduler_events import LABS, lab_systems, signatures
from labq.domain.priority import Priority
from labq.domain.requirements import Requirement, parse
from labq.domain.states import RecipeState
from labq.scheduler import decisions as d
from labq.scheduler.core import Scheduler
from labq.scheduler.entries import RecipeSubmission, SchedulerConfig, SetSubmission
from labq.scheduler.vms import VmQuota, VmShape, vm_slots

SIZES = (VmShape("small", 2, 4096), VmShape("large", 4, 16384))


@dataclass(frozen=True)
class Cost:
    pending: list[float]  # seconds per pending-system event
    new: list[float]  # seconds per new-job event
    started: int  # sets the pending-system events started
    on_vms: int  # of those, on a VM slot

    def plus(self, other: Cost) -> Cost:
        return Cost(
            self.pending + other.pending,
            self.new + other.new,
            self.started + other.started,
            self.on_vms + other.on_vms,
        )


def quota(lab: str, vms: int) -> VmQuota:
    return VmQuota(lab, "KVM", vms, 4 * vms, 8192 * vms, SIZES)


def vm_able(n: int, rng: random.Random) -> list[Requirement]:
    """Host requirements without a machine type: a machine or a VM of the size fits."""
    out = []
    for _ in range(n):
        native: dict[str, object] = {"memory_mb": {">=": rng.choice([2048, 4096, 8192])}}
        if rng.random() < 0.5:
            native["arch"] = "x86_64"
        out.append(parse(native))
    return out


def run(systems: int, queued: int, sigs: int, events: int, vms_per_lab: int) -> Cost:
    rng = random.Random(7)
    core = Scheduler(SchedulerConfig(aging_bump_after=3600.0))
    ids = iter(range(1, 10**9))
    running: list[tuple[int, int]] = []
    for system in lab_systems(systems, rng):
        core.add_system(system, 0.0)
        sid, rid = next(ids), next(ids)
        pin = parse({"fqdn": system.fqdn})
        core.submit([SetSubmission(sid, sid, (RecipeSubmission(rid, pin),), submitted=0.0)], 0.0)
        running.append((sid, rid))
    reqs = signatures(sigs - sigs // 5, rng) + vm_able(sigs // 5, rng)
    slots = set()
    for i in range(LABS if vms_per_lab else 0):
        for slot in vm_slots(quota(f"lab{i}", vms_per_lab)):
            core.add_system(slot, 0.0)
            slots.add(slot.fqdn)
    started = on_vms = 0

    def submit(at: float) -> list[d.Decision]:
        sid, rid = next(ids), next(ids)
        recipe = RecipeSubmission(rid, rng.choice(reqs))
        priority = rng.choice(list(Priority))
        entry = SetSubmission(sid, sid, (recipe,), priority=priority, submitted=at)
        return core.submit([entry], at)

    def track(out: list[d.Decision], counted: bool) -> None:
        nonlocal started, on_vms
        for decision in out:
            if isinstance(decision, d.Start):
                entry = core.sets[decision.set]
                running.insert(0, (entry.id, entry.recipes[0].id))
                started += counted
                on_vms += counted and entry.recipes[0].system in slots

    for i in range(queued):
        track(submit(i * 0.01), False)  # the idle slots fill here
    now = queued * 0.01
    pending, new = [], []
    rng.shuffle(running)
    for _ in range(events):
        now += 1.0
        sid, rid = running.pop()
        t0 = time.perf_counter()
        out = core.finish(sid, {rid: RecipeState.COMPLETED}, now)
        pending.append(time.perf_counter() - t0)
        track(out, True)
        t0 = time.perf_counter()
        out = submit(now)
        new.append(time.perf_counter() - t0)
        track(out, True)
    return Cost(pending, new, started, on_vms)


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def report(
    systems: int, queued: int, sigs: int, events: int, vms_per_lab: int, rounds: int
) -> None:
    print(
        f"scheduler events: {systems} systems, {queued} queued sets, {sigs} signatures, "
        f"{events} events, {rounds} rounds of each run, in turn; "
        f"with providers: {vms_per_lab} VM slots in each of {LABS} labs"
    )
    without = Cost([], [], 0, 0)
    with_vms = Cost([], [], 0, 0)
    for i in range(rounds):  # alternate which goes first: neither gets the cold start alone
        order = [0, vms_per_lab] if i % 2 == 0 else [vms_per_lab, 0]
        for vms in order:
            cost = run(systems, queued, sigs, events, vms)
            if vms:
                with_vms = with_vms.plus(cost)
            else:
                without = without.plus(cost)
    for name, part in (("pending-system", "pending"), ("new-job", "new")):
        base, vm = getattr(without, part), getattr(with_vms, part)
        for stat, f in (("median", statistics.median), ("p90", p90)):
            print(
                f"  {name:15s} {stat:6s} without {f(base) * 1e3:7.3f} ms"
                f"  with {f(vm) * 1e3:7.3f} ms  ratio {f(vm) / f(base):5.2f}"
            )
    print(
        f"  sets started by the events: without {without.started}, "
        f"with {with_vms.started} ({with_vms.on_vms} on VMs)"
    )
