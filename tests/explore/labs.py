"""The small labs the suite explores (each in a few seconds), and the bench's larger one."""

from __future__ import annotations

from labq.domain.priority import Priority
from labq.domain.states import Condition
from labq.sim.explore.lab import Lab, job, systems

# Two labs, a pool closed to all but two groups with caps, one open pool.
POOLS = [
    {"name": "shared"},
    {"name": "team", "access": {"qa": "high", "kernel": "low"}},
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
    drain=3,
    aborts=("short",),
)

POOLED = Lab(
    "pooled",
    {
        "pools": POOLS,
        "systems": systems("east", ["t1", "t2"], pools=["team"]) + systems("east", ["s1"], pools=["shared"]),
        "jobs": [
            job("kernel", 1, group="kernel", priority="urgent", max_time=2),
            job("qa", 2, group="qa", max_time=1),
            job("anyone", 1, group="docs"),
        ],
    },
    horizon=2,
    drain=3,
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
    drain=3,
    conditions=(("e1", Condition.BROKEN), ("e1", Condition.AUTOMATED), ("e2", Condition.REMOVED)),
    cancels=("two",),
    aborts=("one",),
)

SUITE = (GANG, POOLED, ADMIN)
