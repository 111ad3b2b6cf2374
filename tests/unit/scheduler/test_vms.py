"""The core with a lab's VM slots (issue 24): a VM only when no idle machine fits, the
quota as slots, requirements against a VM's facts, gangs that mix machines and VMs."""

from __future__ import annotations

from typing import Any

import pytest

from labq.domain.requirements import parse
from labq.scheduler import decisions as d
from labq.scheduler.core import Scheduler
from labq.scheduler.entries import RecipeSubmission, SetSubmission, SystemEntry
from labq.scheduler.vms import VmQuota, VmShape, slot_plan, vm_slots

QUOTA = VmQuota("lab1", "KVM", 2, 4, 4096, (VmShape("m", 2, 2048),))


def core(machines: int) -> Scheduler:
    scheduler = Scheduler()
    for i in range(machines):
        fact = {"fqdn": f"s{i}", "lab": "lab1", "arch": "x86_64", "memory_mb": 16384}
        scheduler.add_system(SystemEntry(f"s{i}", "lab1", fact, frozenset()), 0)
    for slot in vm_slots(QUOTA):
        scheduler.add_system(slot, 0)
    return scheduler


def submission(set_id: int, *hosts: dict[str, Any]) -> SetSubmission:
    recipes = tuple(
        RecipeSubmission(id=set_id * 10 + i, requirement=parse(h)) for i, h in enumerate(hosts)
    )
    return SetSubmission(id=set_id, job=set_id, submitted=float(set_id), recipes=recipes)


def created(decisions: list[d.Decision]) -> list[str]:
    return [x.system for x in decisions if isinstance(x, d.CreateVm)]


def test_a_machine_is_taken_before_a_vm():
    scheduler = core(1)
    out = scheduler.submit([submission(1, {})], 1)
    assert created(out) == []
    assert scheduler.systems["s0"].recipe == 10


def test_a_gang_wider_than_the_lab_gets_vms_for_what_it_lacks():
    out = core(1).submit([submission(1, {}, {}, {})], 1)
    assert sorted(created(out)) == ["vm1.lab1.vms", "vm2.lab1.vms"]
    assert any(isinstance(x, d.Start) for x in out)


def test_the_quota_caps_what_starts_and_bare_metal_refuses_vms():
    scheduler = core(0)
    out = scheduler.submit([submission(1, {}, {}, {})], 1)  # three VMs, two slots
    assert created(out) == []
    assert not any(isinstance(x, d.Start) for x in out)
    out = scheduler.submit([submission(2, {"hypervisor": ""})], 2)
    assert created(out) == []
    out = scheduler.submit([submission(3, {"memory_mb": {">=": 4096}})], 3)
    assert created(out) == []  # no size has 4 GiB


def test_a_freed_slot_goes_to_the_best_in_the_order():
    scheduler = core(0)
    scheduler.submit([submission(1, {}, {})], 1)  # both slots
    scheduler.submit([submission(2, {"hypervisor": "KVM"})], 2)
    out = scheduler.submit([submission(3, {"cpus": {">=": 2}})], 3)
    assert created(out) == []
    out = scheduler.finish(1, {}, 4)
    assert [x.set for x in out if isinstance(x, d.CreateVm)] == [2, 3]


@pytest.mark.parametrize(
    ("limits", "sizes", "expected"),
    [
        ((3, 4, 4096), [("s", 1, 1024, None), ("b", 2, 2048, 1)], ["b", "s", "s"]),
        ((4, 2, 99999), [("s", 1, 1024, None)], ["s", "s"]),
        ((1, 1, 512), [("s", 1, 1024, None)], []),
    ],
)
def test_the_quota_is_cut_into_slots_that_fit_it(limits, sizes, expected):
    quota = VmQuota("l", "KVM", *limits, tuple(VmShape(*s) for s in sizes))
    assert [s.name for s in slot_plan(quota)] == expected


def test_counts_beyond_the_quota_are_refused():
    quota = VmQuota("l", "KVM", 1, 8, 8192, (VmShape("b", 2, 2048, 2),))
    with pytest.raises(ValueError, match="more than the quota"):
        slot_plan(quota)
