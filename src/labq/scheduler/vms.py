"""Dynamic systems: a lab's VM provider as slots in the lab (docs/scheduling.md § VMs).

A provider's quota (VMs at once, vCPUs, memory) is cut into *slots* once, when
the lab is configured: each slot is one VM of one offered size, and the slots
together fit the quota. A slot is a system of the lab like any other — its
facts are those a VM of its size has (``hypervisor``, ``cpus``, ``memory``,
``arch``) — so host requirements, pools, the order, holds, gangs and backfill
treat it as they treat a machine, and the quota can never be exceeded: there is
no slot beyond it. The placer takes a slot only when no available physical
system would do (:class:`~labq.scheduler.placement.Placer`), and a set that
starts on a slot gets a :class:`~labq.scheduler.decisions.CreateVm` for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from labq.domain.requirements import Fact, Scalar
from labq.scheduler import decisions as d
from labq.scheduler.entries import SetEntry, SystemEntry


@dataclass(frozen=True)
class VmShape:
    """One size a provider offers; ``count`` slots of it (None: as many as the quota leaves)."""

    name: str
    cpus: int
    memory: int  # MiB
    count: int | None = None


@dataclass(frozen=True)
class VmQuota:
    """What a lab's provider may make at once, and the sizes it offers."""

    lab: str
    hypervisor: str
    max_vms: int
    max_vcpus: int
    max_memory: int  # MiB
    sizes: tuple[VmShape, ...]
    arch: str = "x86_64"
    pools: frozenset[str] = frozenset()


def slot_plan(quota: VmQuota) -> list[VmShape]:
    """The slots, one shape each: sizes with a ``count`` first, then the others in turn
    while the quota has room (raises ValueError when the counts alone exceed it)."""
    plan: list[VmShape] = []
    cpus = memory = 0
    for size in quota.sizes:
        for _ in range(size.count or 0):
            plan.append(size)
            cpus, memory = cpus + size.cpus, memory + size.memory
    if len(plan) > quota.max_vms or cpus > quota.max_vcpus or memory > quota.max_memory:
        raise ValueError(
            f"the sizes' counts need {len(plan)} VMs, {cpus} vCPUs and {memory} MiB: "
            f"more than the quota ({quota.max_vms}, {quota.max_vcpus}, {quota.max_memory})"
        )
    open_sizes = [s for s in quota.sizes if s.count is None]
    while open_sizes and len(plan) < quota.max_vms:
        fitting = [
            s
            for s in open_sizes
            if cpus + s.cpus <= quota.max_vcpus and memory + s.memory <= quota.max_memory
        ]
        for size in fitting:
            if len(plan) == quota.max_vms:
                break
            if cpus + size.cpus <= quota.max_vcpus and memory + size.memory <= quota.max_memory:
                plan.append(size)
                cpus, memory = cpus + size.cpus, memory + size.memory
        open_sizes = fitting
        if not fitting:
            break
    return plan


def slot_name(lab: str, number: int) -> str:
    """The system name of a lab's ``number``-th VM slot."""
    return f"vm{number}.{lab}.vms"


def vm_attributes(quota: VmQuota, size: VmShape) -> dict[str, Scalar]:
    """The attributes a VM of ``size`` has (a system's own: fqdn, lab, arch, pool beside)."""
    return {
        "hypervisor": quota.hypervisor,
        "cpus": size.cpus,
        "memory_mb": size.memory,
        "vm_size": size.name,
    }


def vm_facts(quota: VmQuota, size: VmShape, fqdn: str) -> dict[str, Fact]:
    """The facts a VM of ``size`` has: what host requirements are evaluated against."""
    return {
        **vm_attributes(quota, size),
        "fqdn": fqdn,
        "lab": quota.lab,
        "arch": quota.arch,
        "pool": quota.pools,
        "condition": "automated",
    }


def slots(quota: VmQuota) -> list[tuple[str, VmShape]]:
    """The lab's VM slots: name and size."""
    return [(slot_name(quota.lab, n), size) for n, size in enumerate(slot_plan(quota), start=1)]


def vm_slots(quota: VmQuota) -> list[SystemEntry]:
    """The lab's VM slots as systems of the core."""
    return [
        SystemEntry(fqdn, quota.lab, vm_facts(quota, size, fqdn), quota.pools, vm=size.name)
        for fqdn, size in slots(quota)
    ]


def creations(entry: SetEntry, systems: Mapping[str, SystemEntry]) -> list[d.CreateVm]:
    """A VM to make for each recipe of a starting set placed on a slot."""
    out = []
    for recipe in entry.recipes:
        system = systems[recipe.system] if recipe.system is not None else None
        if system is not None and system.vm is not None:
            out.append(d.CreateVm(recipe.id, entry.id, system.fqdn, system.lab, system.vm))
    return out
