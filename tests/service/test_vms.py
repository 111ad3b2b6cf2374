"""A lab's VM slots in the store: added by the leader, removed when the quota shrinks,
and seen by the rebuilt core as slots (issue 24)."""

from __future__ import annotations

from labq.config import Settings
from labq.domain.states import Condition
from labq.service import bridge
from labq.service.vms import add_slots
from labq.store import transaction
from tests.service.test_loop import NOW, engine  # noqa: F401 (a fixture)

SIZES = [{"name": "m", "cpus": 1, "memory": 1024}]
HOOKS = {"create": ["true"], "destroy": ["true"], "list": ["true"]}


def settings(max_vms: int) -> Settings:
    vms = {
        "kind": "command",
        "max_vms": max_vms,
        "max_vcpus": 8,
        "max_memory": 8192,
        "sizes": SIZES,
        "command": HOOKS,
    }
    return Settings.model_validate({"labs": {"lab1": {"vms": vms}, "lab2": {"vms": vms}}})


def test_slots_are_added_once_and_removed_when_the_quota_shrinks(engine):  # noqa: F811
    with transaction(engine) as repo:
        added = add_slots(repo, settings(3), now=NOW)
    assert added == [f"vm{i}.{lab}.vms" for lab in ("lab1", "lab2") for i in (1, 2, 3)]
    with transaction(engine) as repo:
        assert add_slots(repo, settings(3), now=NOW) == []
        add_slots(repo, settings(1), now=NOW)
        conditions = {s.fqdn: s.condition for s in repo.systems.list_systems(lab="lab1")}
        core = bridge.rebuild(repo, settings(1).scheduler())
    assert conditions == {
        "vm1.lab1.vms": Condition.AUTOMATED,
        "vm2.lab1.vms": Condition.REMOVED,
        "vm3.lab1.vms": Condition.REMOVED,
    }
    assert core.systems["vm1.lab1.vms"].vm == "m"
    assert core.systems["vm1.lab1.vms"].facts["hypervisor"] == "KVM"
