"""The small labs the suite explores (each in a few seconds), and the bench's larger one."""

from __future__ import annotations

from labq.domain.priority import Priority
from labq.domain.states import Condition
from labq.sim.explore.lab import Lab, job, systems

# Pools closed to all but the groups they name, with caps (seed 002).
POOLS = [
    {"name": "team", "access": {"qa": "high", "kernel": "low"}},
    {"name": "docs", "access": {"docs": "normal", "kernel": "normal"}},
]

GANG = Lab(
    "gang",
    {
        "systems": systems("east", ["e1", "e2"]) + systems("west", ["w1"]),
        "jobs": [
            job("short", 1, max_time=1),
            job("pair", 2, priority="high", max_time=2),
            job("long", 1),
        ],
    },
    horizon=2,
    aborts=("short",),
)

POOLED = Lab(
    "pooled",
    {
        "pools": POOLS,
        "systems": systems("east", ["t1"], pools=["team"])
        + systems("east", ["s1"], pools=["docs"]),
        "jobs": [
            job("busy", 1, group="qa", max_time=1),
            job("anyone", 1, group="docs", max_time=2),
            job("kernel", 1, group="kernel", priority="urgent", max_time=2),
            job("qa", 1, group="qa"),
        ],
    },
    horizon=1,
    priorities=(("anyone", Priority.HIGH),),
)

ADMIN = Lab(
    "admin",
    {
        "systems": systems("east", ["e1", "e2"]),
        "jobs": [
            job("one", 1, max_time=2, max_retries=1),
            job("two", 2, priority="high"),
        ],
    },
    horizon=2,
    conditions=(("e1", Condition.BROKEN), ("e1", Condition.AUTOMATED), ("e2", Condition.REMOVED)),
    cancels=("two",),
    aborts=("one",),
)


# Beaker's ABBA: two groups with opposite caps on two pools, two hold slots in the lab.
ABBA = Lab(
    "abba",
    {
        "config": {"holds": {"per_lab": 2}},
        "pools": [
            {"name": "pa", "access": {"qa": "high", "kernel": "low", "everybody": "low"}},
            {"name": "pb", "access": {"kernel": "high", "qa": "low", "everybody": "low"}},
        ],
        "systems": systems("east", ["t1"], pools=["pa"]) + systems("east", ["t2"], pools=["pb"]),
        "jobs": [
            job("busy1", 1, max_time=1, host={"fqdn": "t1"}),
            job("busy2", 1, max_time=1, host={"fqdn": "t2"}),
            job("qa", 2, group="qa", priority="high"),
            job("kernel", 2, group="kernel", priority="high"),
        ],
    },
    horizon=0,
)
# A holder with a reservation, a set that would delay it (no max_time), a running set.
RESERVE = Lab(
    "reserve",
    {
        "systems": systems("east", ["a1", "a2"]),
        "jobs": [
            job("first", 1, max_time=2),
            job("wide", 2, priority="high"),
            job("narrow", 1),
        ],
    },
    horizon=1,
)


# Declared locks (seed 004): a writer and a reader of nfs1, and a lock-free set.
LOCKS = Lab(
    "locks",
    {
        "systems": systems("east", ["e1", "e2"]),
        "jobs": [
            job("writer", 1, max_time=1, locks={"storage": {"exclusive": ["nfs1"]}}),
            job("reader", 1, locks={"storage": {"shared": ["nfs1"]}}),
            job("plain", 1, max_time=2),
        ],
    },
    horizon=1,
)

# Two labs of two: a wide set holds in one lab and may move to the other when it frees.
MOVE = Lab(
    "move",
    {
        "systems": systems("east", ["e1", "e2"]) + systems("west", ["w1", "w2"]),
        "jobs": [
            job("east", 1, max_time=2, host={"fqdn": "e1"}),
            job("west", 1, max_time=1, host={"fqdn": "w1"}),
            job("wide", 2, priority="high", max_time=1),
            job("small", 1, max_time=1),
        ],
    },
    horizon=1,
)

# A whole-lab set kept behind a writer while a reader waits too (the explorer found the
# whole-lab set weighing 0 after the reader, served first, started into its lab).
WHOLE_LAB = Lab(
    "whole-lab",
    {
        "systems": systems("east", ["e1", "e2"]),
        "jobs": [
            job("all", 1, max_time=1, locks={"whole_lab": True}),
            job("w", 1, max_time=2, locks={"storage": {"exclusive": ["nfs"]}}),
            job("r", 1, locks={"storage": {"shared": ["nfs"]}}),
            job("u", 1, locks={"network": {"exclusive": "unknown"}}),
        ],
    },
    horizon=1,
    drain=5,  # sets one after another behind the locks: the queue needs 5 instants to drain
)

# Backfill on predictions: a holder's reservation counts on a running set's prediction, a
# set may backfill on its own; the explorer ends each set at any instant, so predictions come
# out right, short (the set is raised as EASY++ does) or long.
PREDICTED = Lab(
    "predicted",
    {
        "config": {"queue": {"backfill_on_predictions": True}},
        "systems": systems("east", ["a1", "a2"]),
        "jobs": [
            job("first", 1, max_time=4, predicted=1),
            job("wide", 2, priority="high"),
            job("narrow", 1, max_time=3, predicted=1),
        ],
    },
    horizon=1,
    drain=7,  # a backfill that outlives its prediction runs to its max_time before wide starts
)

# Distro trees per lab (issue 24): east carries RHEL 9, west Fedora only; RHEL 9 may be
# removed from east (a hold there is given back; a set no lab serves any more is aborted)
# and added to west.
RHEL9 = {"name": "RHEL-9.4", "family": "RedHatEnterpriseLinux9"}
FEDORA = {"name": "Fedora-40", "family": "Fedora40"}
WANTS_RHEL9 = {"distro": {"family": "RedHatEnterpriseLinux9"}}
DISTROS = Lab(
    "distros",
    {
        "systems": systems("east", ["e1", "e2"]) + systems("west", ["w1"]),
        "distros": {"east": [RHEL9, FEDORA], "west": [FEDORA]},
        "jobs": [
            {"id": "busy", "recipe_sets": [{"max_time": 2, "recipes": [WANTS_RHEL9]}]},
            {"id": "pair", "recipe_sets": [{"priority": "high", "recipes": [WANTS_RHEL9] * 2}]},
            job("plain", 1, max_time=1),
        ],
    },
    horizon=1,
    distros=(("east", (FEDORA,)), ("west", (FEDORA, RHEL9))),
)

# VMs made on demand (issue 24): one machine and a provider with room for one 2-CPU VM. A
# pair needs the VM beside the machine; a bare-metal set refuses VMs; one runs anywhere.
VMS = Lab(
    "vms",
    {
        "systems": systems("east", ["e1"]) + systems("west", ["w1"]),
        "vms": {
            "east": {
                "max_vms": 1,
                "max_vcpus": 2,
                "max_memory": 2048,
                "sizes": [{"name": "m", "cpus": 2, "memory": 2048}],
            }
        },
        "jobs": [
            job("metal", 1, max_time=1, host={"hypervisor": ""}),
            job("pair", 2, priority="high", max_time=2),
            job("one", 1),
        ],
    },
    horizon=1,
)

SUITE = (GANG, POOLED, ADMIN, ABBA, RESERVE, LOCKS, MOVE, WHOLE_LAB, PREDICTED, DISTROS, VMS)
