"""VMs made on demand in the simulator (issue 24, item 3): a VM only when no idle physical
system fits and the quota allows; every other rule as with machines."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from labq.domain.requirements import matches
from labq.scheduler.vms import VmQuota, VmShape, slot_plan
from labq.sim.metrics import recipe_rows, stuck
from labq.sim.runner import Run

from .helpers import run

EXAMPLE = Path(__file__).parents[2] / "examples" / "sim" / "vms-on-demand.yaml"


def rows(result: Run) -> dict[tuple[str, str | None], dict[str, Any]]:
    return {(r["job"], r["role"]): r for r in recipe_rows(result.world)}


def test_the_example_makes_vms_only_where_no_machine_will_do():
    result = run(yaml.safe_load(EXAMPLE.read_text()), "labq")
    got = rows(result)
    assert {got["triple", r]["system"] for r in "abc"} == {"e1", "e2", "vm1.east.vms"}
    assert got["metal", "m"]["system"] in ("e1", "e2")  # hypervisor "" refuses a VM
    assert got["big", "g"]["system"] in ("e1", "e2")  # no size has 8 GiB
    assert got["small", "s"]["system"] in ("e1", "e2")  # a machine was idle: no VM
    # two VMs at most: the guests wait for triple's VM to go
    assert got["guests", "g1"]["started"] == got["triple", "c"]["finished"] == 100
    assert [slot for _, _, slot, _ in result.world.vms_created] == [
        "vm1.east.vms",
        "vm1.east.vms",
        "vm2.east.vms",
    ]
    assert not stuck(result.world)


HOSTS: list[dict[str, Any]] = [
    {},
    {"hypervisor": ""},
    {"hypervisor": "KVM"},
    {"memory_mb": {">=": 4096}},
    {"cpus": {">=": 2}},
    {"gpu": True},
]


def vm_scenario(seed: int) -> dict[str, Any]:
    """One or two labs of a few machines, each lab with a small VM quota, mixed work."""
    rng = random.Random(seed)
    labs = ["east", "west"][: rng.randint(1, 2)]
    systems = [
        {
            "fqdn": f"s{i}",
            "lab": rng.choice(labs),
            "attrs": {"memory_mb": rng.choice([2048, 8192]), "cpus": 4, "gpu": rng.random() < 0.3},
        }
        for i in range(rng.randint(1, 4))
    ]
    vms = {
        lab: {
            "max_vms": rng.randint(1, 3),
            "max_vcpus": rng.randint(2, 6),
            "max_memory": rng.choice([2048, 6144]),
            "sizes": rng.sample(
                [
                    {"name": "tiny", "cpus": 1, "memory": 1024},
                    {"name": "wide", "cpus": 2, "memory": 2048},
                    {"name": "fat", "cpus": 1, "memory": 4096},
                ],
                k=rng.randint(1, 3),
            ),
        }
        for lab in labs
        if rng.random() < 0.8
    }
    return {
        "labs": labs,
        "systems": systems,
        "vms": {k: v for k, v in vms.items() if room(v)},
        "jobs": jobs_of(rng),
    }


def room(quota: dict[str, Any]) -> bool:
    shapes = tuple(VmShape(s["name"], s["cpus"], s["memory"]) for s in quota["sizes"])
    limits = (quota["max_vms"], quota["max_vcpus"], quota["max_memory"])
    return bool(slot_plan(VmQuota("lab", "KVM", *limits, shapes)))


def jobs_of(rng: random.Random) -> list[dict[str, Any]]:
    jobs = []
    for j in range(rng.randint(3, 12)):
        recipes = [
            {"host": rng.choice(HOSTS), "duration": rng.choice([10, 50, 100])}
            for _ in range(rng.choice([1, 1, 2, 3]))
        ]
        recipe_set = {
            "priority": rng.choice(["low", "normal", "high"]),
            "recipes": recipes,
            "max_time": rng.choice([None, 120]),
        }
        jobs.append({"id": f"j{j}", "submit_at": rng.randint(0, 200), "recipe_sets": [recipe_set]})
    return jobs


def check_vms(data: dict[str, Any], result: Run) -> None:
    world = result.world
    hosts = {r.id: r.requirement for r in world.recipes.values()}
    for now, recipe, slot, idle in world.vms_created:
        requirement = hosts[recipe]
        assert matches(requirement, world.ledger.systems[slot].facts())
        fitting = [f for f in idle if matches(requirement, world.ledger.systems[f].facts())]
        assert not fitting, f"at {now} a VM on {slot} for recipe {recipe}, but {fitting} idle"
    # the quota: never more VMs, vCPUs or memory at once than the lab's provider allows
    spans = [r for r in recipe_rows(world) if r["system"] and ".vms" in r["system"]]
    for lab, quota in data["vms"].items():
        sizes = {s["name"]: s for s in quota["sizes"]}
        mine = [r for r in spans if r["system"].endswith(f".{lab}.vms")]
        for r in mine:
            if r["started"] is None:
                continue
            at = r["started"]
            live = [
                o
                for o in mine
                if o["started"] is not None and o["started"] <= at < (o["finished"] or 1e18)
            ]
            used = [sizes[world.ledger.systems[o["system"]].attributes["vm_size"]] for o in live]
            assert len(used) <= quota["max_vms"]
            assert sum(s["cpus"] for s in used) <= quota["max_vcpus"]
            assert sum(s["memory"] for s in used) <= quota["max_memory"]
    assert not stuck(world)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_vms_only_when_no_machine_fits_and_within_the_quota(seed):
    data = vm_scenario(seed)
    check_vms(data, run(data, "labq", seed))
