"""Every policy, on random scenarios: no system given twice, sets start whole, same seed same run.

The World applies each decision to a lifecycle Ledger that raises on a system
given to two recipes and on any illegal move, so simply running is the check.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labq.sim.baselines import BASELINES
from labq.sim.metrics import recipe_rows, stuck
from labq.sim.policy import registry
from labq.sim.runner import Run

from .helpers import run

ROOT = Path(__file__).parents[2]
POLICIES = sorted(registry())
# Policies that hold nothing, or one set at a time, cannot deadlock: nothing may be stuck.
NEVER_STUCK = frozenset({"easy", "teuthology-dispatcher", "teuthology-workers"})
HOSTS: list[dict[str, Any]] = [
    {},
    {"memory": {">=": 8}},
    {"gpu": True},
    {"fqdn": "s0"},
    {"or": [{"lab": "east"}, {"memory": 16}]},
]


def random_scenario(seed: int) -> dict[str, Any]:
    """Two labs, pools with access rules, mixed requirements, and admins at work."""
    rng = random.Random(seed)
    pools = [
        {"name": "shared"},
        {"name": "team", "access": {"qa": "high", "everybody": "low"}},
        {"name": "closed", "access": {"kernel": "urgent"}},
    ]
    systems = [
        {
            "fqdn": f"s{i}",
            "lab": rng.choice(["east", "west"]),
            "pools": rng.choices(["shared", "team", "closed"], weights=[6, 3, 1]),
            "attrs": {"memory": rng.choice([4, 8, 16]), "gpu": rng.random() < 0.3},
        }
        for i in range(rng.randint(4, 10))
    ]
    jobs = [_random_job(rng, j) for j in range(rng.randint(4, 25))]
    events: list[dict[str, Any]] = []
    for _ in range(rng.randint(0, 4)):
        fqdn = rng.choice(systems)["fqdn"]
        at = rng.uniform(0, 600)
        events.append({"at": at, "system": fqdn, "condition": rng.choice(["broken", "manual"])})
        events.append({"at": at + rng.uniform(1, 300), "system": fqdn, "condition": "automated"})
    for job in rng.sample(jobs, k=min(2, len(jobs))):
        kind = rng.choice(["cancel", "priority"])
        at = job["submit_at"] + rng.uniform(0, 200)
        if kind == "cancel":
            events.append({"at": at, "cancel": job["id"]})
        else:
            events.append({"at": at, "job": job["id"], "priority": "urgent"})
    return {
        "config": {"poll_every": rng.choice([10, 60]), "install_time": rng.choice([0, 15])},
        "pools": pools,
        "systems": systems,
        "jobs": jobs,
        "events": events,
    }


def _random_job(rng: random.Random, j: int) -> dict[str, Any]:
    sets = []
    for _ in range(rng.choice([1, 1, 2])):
        recipes = [
            {
                "host": rng.choice(HOSTS),
                "duration": rng.uniform(10, 400),
                "outcome": rng.choice(["pass", "pass", "fail", "abort"]),
            }
            for _ in range(rng.choice([1, 1, 2, 3]))
        ]
        recipe_set: dict[str, Any] = {
            "priority": rng.choice(["low", "normal", "high"]),
            "max_retries": rng.choice([0, 1]),
            "recipes": recipes,
        }
        if rng.random() < 0.6:
            recipe_set["max_time"] = rng.uniform(50, 500)
        sets.append(recipe_set)
    job: dict[str, Any] = {"id": f"j{j}", "submit_at": rng.uniform(0, 500), "recipe_sets": sets}
    if rng.random() < 0.5:
        job["group"] = rng.choice(["qa", "kernel"])
    return job


def check(result: Run) -> None:
    """Sets start whole, in one lab, on systems their recipes may use."""
    world = result.world
    for run_ in world.sets.values():
        if run_.started_at is None:
            continue
        systems = [r.ran_on for r in run_.recipes]
        assert None not in systems, f"{result.policy}: set {run_.id} started without a system"
        assert len(set(systems)) == len(systems)
        labs = {world.ledger.systems[s].lab for s in systems if s is not None}
        assert len(labs) == 1, f"{result.policy}: set {run_.id} spans labs {labs}"
        assert {r.started_at for r in run_.recipes} == {run_.started_at}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("seed", range(6))
def test_random_scenarios_run_clean(policy, seed):
    result = run(random_scenario(seed), policy, seed)
    check(result)
    if policy in NEVER_STUCK:
        assert stuck(result.world) == []


@pytest.mark.parametrize("seed", range(6))
def test_labq_leaves_no_runnable_set_stuck(seed):
    # DESIGN.md § No deadlock, no starvation
    assert stuck(run(random_scenario(seed), "labq", seed).world) == []


@pytest.mark.parametrize(
    "policy",
    [*sorted(BASELINES), "labq"],
)
def test_runs_do_not_depend_on_the_hash_seed(policy):
    """Same input and seed, same schedule, in another process (string hashing differs)."""
    program = (
        "import json, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from tests.sim.test_invariants import random_scenario\n"
        "from tests.sim.helpers import run\n"
        "from labq.sim.metrics import recipe_rows\n"
        "print(json.dumps([recipe_rows(run(random_scenario(s), sys.argv[2], s).world)"
        " for s in range(12)]))\n"
    )
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", program, str(ROOT), policy],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=60,
        )
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("policy", POLICIES)
def test_same_seed_same_schedule(policy):
    data = random_scenario(99)
    first = recipe_rows(run(data, policy, seed=7).world)
    again = recipe_rows(run(data, policy, seed=7).world)
    assert first == again


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_no_policy_double_books_any_scenario(seed):
    data = random_scenario(seed)
    for policy in POLICIES:
        check(run(data, policy, seed))
