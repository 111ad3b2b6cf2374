"""Locks in the simulator (seed 004): declared locks, lock plans, running limits, waiting time."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from labq.domain.locktable import Grant
from labq.domain.states import RecipeState
from labq.errors import InputError
from labq.sim.metrics import lock_waits, measure
from labq.sim.policy import registry
from labq.sim.report import compare_report, print_run, run_report
from labq.sim.runner import Run, simulate
from labq.sim.scenario import load_scenario, parse_scenario

from .helpers import job, run, the_set

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples/sim/contended-locks.yaml"
NFS_X = {"storage": {"exclusive": ["nfs1"]}}


def lab(count: int = 4, **queue: Any) -> dict[str, Any]:
    """One lab of ``count`` systems; ``queue`` goes to ``config.queue``."""
    data: dict[str, Any] = {"systems": [{"fqdn": "n.lab", "lab": "lab", "count": count}]}
    if queue:
        data["config"] = {"queue": queue}
    return data


def plan(lock: str, at: float, hold: float, *, exclusive: bool = False) -> dict[str, Any]:
    return {"lock": lock, "at": at, "for": hold, "exclusive": exclusive}


# --- the scenario format -----------------------------------------------------------


@pytest.mark.parametrize(
    ("recipe", "set_keys", "place", "problem"),
    [
        (
            {"lock_plan": [{"lock": "nfs1", "at": 0, "for": 10}]},
            {},
            "recipes[0].lock_plan[0].lock",
            "expected LEVEL:NAME",
        ),
        (
            {"lock_plan": [{"lock": "disk:sda", "at": 0, "for": 10}]},
            {},
            "recipes[0].lock_plan[0].lock",
            "unknown lock level 'disk'",
        ),
        (
            {"duration": 60, "lock_plan": [plan("storage:nfs1", 50, 20)]},
            {},
            "recipes[0].lock_plan[0]",
            "must end within the recipe's duration: at 50 + for 20 > duration 60 s",
        ),
        (
            {"lock_plan": [{"lock": "storage:nfs1", "at": 0}]},
            {},
            "recipes[0].lock_plan[0].for",
            "missing required key 'for'",
        ),
        (
            {"lock_plan": [plan("storage:nfs1", -1, 10)]},
            {},
            "recipes[0].lock_plan[0].at",
            "greater than or equal to 0",
        ),
        (
            {"lock_plan": [plan("storage:nfs1", 0, 0)]},
            {},
            "recipes[0].lock_plan[0].for",
            "greater than 0",
        ),
        (
            {"lock_plan": [{"lock": "storage:nfs1", "at": 0, "for": 1, "mode": "x"}]},
            {},
            "recipes[0].lock_plan[0].mode",
            "unknown key 'mode'",
        ),
        ({}, {"locks": {"storage": {"exclusive": []}}}, "locks.storage.exclusive", "names"),
        ({}, {"locks": {"disk": "none"}}, "locks.disk", "unknown lock level 'disk'"),
        ({}, {"locks": {"whole_lab": "yes"}}, "locks.whole_lab", "expected true or false"),
    ],
)
def test_bad_locks_and_lock_plans_name_the_place(recipe, set_keys, place, problem):
    data = {**lab(), "jobs": [job("j", 0, recipe, **set_keys)]}
    with pytest.raises(InputError) as caught:
        parse_scenario(data, source="s.yaml")
    assert caught.value.place == f"jobs[0].recipe_sets[0].{place}"
    assert problem in caught.value.problem


def test_a_bad_lock_plan_in_a_file_names_its_line(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "systems: [{fqdn: a, lab: l}]\n"
        "jobs:\n"
        "  - id: j\n"
        "    recipe_sets:\n"
        "      - recipes:\n"
        "          - duration: 10\n"
        "            lock_plan:\n"
        "              - {lock: 'disk:sda', at: 0, for: 5}\n"
    )
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    assert caught.value.line == 8
    assert str(path) in str(caught.value)


def test_running_limits_must_name_known_labs():
    with pytest.raises(InputError) as caught:
        parse_scenario({**lab(lab_running_limits={"elsewhere": 2}), "jobs": []}, source="s")
    assert caught.value.place == "config.queue.lab_running_limits.elsewhere"


def test_queue_config_reaches_the_core():
    config = {"running_limit": 3, "lab_running_limits": {"lab": 2}, "spv_base": 2.0}
    scenario = parse_scenario({**lab(**config, tick=10, aging_ticks=5)}, source="s")
    core = scenario.config.scheduler()
    assert (core.running_limit, core.lab_running_limits) == (3, (("lab", 2),))
    assert (core.spv_base, core.tick, core.aging_ticks, core.predictive) == (2.0, 10, 5, True)


def test_labq_fifo_is_the_core_without_the_predictive_weight():
    scenario = parse_scenario(lab(), source="s")
    result = simulate(scenario, {}, "labq-fifo")
    assert result.world.policy.config.predictive is False  # type: ignore[attr-defined]
    assert simulate(scenario, {}, "labq").world.policy.config.predictive is True  # type: ignore[attr-defined]


# --- declared locks ----------------------------------------------------------------


def test_a_set_blocked_on_a_declared_exclusive_lock_waits_then_runs():
    data = {
        **lab(),
        "jobs": [
            job("a", 0, {"duration": 100}, locks=NFS_X),
            job("b", 10, {"duration": 50}, locks=NFS_X),
            job("c", 10, {"duration": 50}),  # declares nothing: not held up
        ],
    }
    # labq-fifo starts b into a free slot, where it waits (labq keeps it queued: below)
    halfway = run({**data, "config": {"until": 50}}, "labq-fifo")
    b = the_set(halfway, "b")
    assert b.started_at == 10
    assert [r.state for r in b.recipes] == [RecipeState.WAITING]
    assert "storage:nfs1 (exclusive)" in (b.lock_waiting or "")

    result = run(data, "labq-fifo")
    b = the_set(result, "b")
    assert (b.started_at, b.finished_at) == (10, 150)  # provisioned when a let go at 100
    assert (b.lock_wait_declared, b.lock_wait_run) == (90, 0)
    assert b.recipes[0].state is RecipeState.COMPLETED
    assert the_set(result, "c").finished_at == 60
    assert lock_waits(result.world).total == 90
    assert result.world.locking.table.holders() == {}


def test_labq_keeps_a_set_that_would_wait_queued_and_gives_its_slot_to_work_that_can_run():
    # issue 11 item 2: a running limit of 2; a holds nfs1; b needs it, c needs nothing
    data = {
        **lab(4, lab_running_limits={"lab": 2}),
        "jobs": [
            job("a", 0, {"duration": 100}, locks=NFS_X),
            job("b", 10, {"duration": 50}, locks=NFS_X),
            job("c", 20, {"duration": 50}),
        ],
    }
    fifo = run(data, "labq-fifo")
    assert the_set(fifo, "b").started_at == 10  # into the free slot, to wait for nfs1
    assert the_set(fifo, "c").started_at == 100  # behind it, for the slot
    result = run(data, "labq")
    b, c = the_set(result, "b"), the_set(result, "c")
    assert (c.started_at, c.finished_at) == (20, 70)  # the slot went to c
    assert (b.started_at, b.finished_at) == (100, 150)  # b started when nfs1 was let go
    assert lock_waits(result.world).total == 0
    assert measure(result.world).makespan == measure(fifo.world).makespan  # nfs1 sets the pace


def test_a_burst_where_half_need_one_exclusive_lock_waits_less_and_ends_sooner_than_fifo():
    # the burst: the lock-needing half used to gather at the tail and wait in the slots
    rng = random.Random(11)
    jobs = [
        job(f"j{i}", i, {"duration": rng.randint(60, 240)}, **({"locks": NFS_X} if i % 2 else {}))
        for i in range(16)
    ]
    data = {**lab(8, lab_running_limits={"lab": 3}), "jobs": jobs}
    results = {policy: run(data, policy) for policy in ("labq", "labq-fifo")}
    waits = {p: lock_waits(r.world).total for p, r in results.items()}
    spans = {p: measure(r.world).makespan for p, r in results.items()}
    assert waits["labq"] == 0 < waits["labq-fifo"]
    assert spans["labq"] <= spans["labq-fifo"]


def test_later_sets_do_not_overtake_a_set_kept_for_a_lock():
    # a reads nfs1; b wants it exclusively and is kept queued; readers that come after b
    # would keep nfs1 busy forever, so they wait behind b (as at the lock service)
    reader = {"storage": {"shared": ["nfs1"]}}
    data = {
        **lab(4),
        "jobs": [
            job("a", 0, {"duration": 100}, locks=reader),
            job("b", 10, {"duration": 50}, locks=NFS_X),
            job("r1", 20, {"duration": 100}, locks=reader),
            job("r2", 90, {"duration": 100}, locks=reader),
        ],
    }
    result = run(data, "labq")
    assert the_set(result, "b").started_at == 100
    assert the_set(result, "r1").started_at == 150
    assert the_set(result, "r2").started_at == 150
    assert lock_waits(result.world).total == 0


def test_a_whole_lab_set_waits_for_the_lab_and_the_lab_waits_for_it():
    data = {
        **lab(),
        "jobs": [
            job("first", 0, {"duration": 100}),
            job("upgrade", 10, {"duration": 50}, locks={"whole_lab": True}),
            job("later", 20, {"duration": 10}),
        ],
    }
    result = run(data, "labq-fifo")
    assert the_set(result, "upgrade").lock_wait_declared == 90
    later = the_set(result, "later")
    assert (later.lock_wait_declared, later.finished_at) == (130, 160)


# --- lock plans -----------------------------------------------------------------------


def test_a_blocked_plan_step_pauses_the_recipe_and_moves_its_end():
    data = {
        **lab(),
        "jobs": [
            job("holder", 0, {"duration": 100}, locks=NFS_X),
            job("reader", 0, {"duration": 100, "lock_plan": [plan("storage:nfs1", 10, 20)]}),
            job("other", 0, {"duration": 30, "lock_plan": [plan("network:vlan7", 0, 30)]}),
        ],
    }
    result = run(data, "labq")
    reader = the_set(result, "reader")
    # work 0-10, blocked 10-100, holds 100-120, work ends at 100 + 90
    assert reader.finished_at == 190
    assert (reader.lock_wait_declared, reader.lock_wait_run) == (0, 90)
    assert reader.recipes[0].lock_wait == 90
    assert the_set(result, "other").finished_at == 30  # nobody else wants vlan7
    held = [(t, g) for t, owner, g in result.world.locking.history if owner == reader.id]
    assert (100, (Grant("storage", "nfs1"), Grant("whole_lab", "lab"))) in held


def test_two_recipes_of_one_set_wait_in_turn_and_the_set_counts_the_wait_once():
    recipes = [
        {"role": "a", "duration": 50, "lock_plan": [plan("storage:nfs1", 10, 5)]},
        {"role": "b", "duration": 50, "lock_plan": [plan("network:vlan7", 20, 5)]},
    ]
    data = {
        **lab(),
        "jobs": [
            job(
                "holder", 0, {"duration": 100}, locks={**NFS_X, "network": {"exclusive": ["vlan7"]}}
            ),
            job("pair", 0, *recipes),
        ],
    }
    pair = the_set(run(data, "labq"), "pair")
    a, b = pair.recipes
    assert (a.lock_wait, b.lock_wait) == (90, 80)
    assert pair.lock_wait_run == 90  # the union of the recipes' waits
    assert pair.finished_at == 140  # a: 10 + 90 blocked + 40; b: 20 + 80 + 30 = 130


def test_a_plan_lock_the_set_declared_is_granted_at_once():
    recipe = {"duration": 50, "lock_plan": [plan("storage:nfs1", 10, 5, exclusive=True)]}
    data = {**lab(), "jobs": [job("a", 0, recipe, locks=NFS_X)]}
    a = the_set(run(data, "labq"), "a")
    assert (a.finished_at, a.lock_wait) == (50, 0)


def test_a_wait_that_would_deadlock_aborts_the_recipe():
    data = {
        **lab(),
        "jobs": [
            job(
                "s", 0, {"duration": 100, "lock_plan": [plan("network:vlan7", 10, 10)]}, locks=NFS_X
            ),
            job(
                "t",
                0,
                {"duration": 100, "lock_plan": [plan("storage:nfs1", 20, 10)]},
                locks={"network": {"exclusive": ["vlan7"]}},
            ),
        ],
    }
    result = run(data, "labq")
    s, t = the_set(result, "s"), the_set(result, "t")
    assert t.recipes[0].state is RecipeState.ABORTED
    assert t.finished_at == 20
    assert "deadlock" in (t.error or "")
    assert "job s set 0" in (t.error or "")
    assert s.recipes[0].state is RecipeState.COMPLETED
    assert (s.lock_wait_run, s.finished_at) == (10, 110)  # vlan7 came free when t ended
    assert lock_waits(result.world).refused == 1


# --- ends of every kind release everything ---------------------------------------------


def test_the_watchdog_releases_the_locks_of_a_set_over_its_time():
    data = {
        **lab(),
        "jobs": [
            job("slow", 0, {"duration": 100}, locks=NFS_X, max_time=40),
            job("next", 10, {"duration": 10}, locks=NFS_X),
        ],
    }
    result = run(data, "labq-fifo")  # labq would keep "next" queued until 40: no wait to see
    assert the_set(result, "slow").recipes[0].state is RecipeState.ABORTED
    nxt = the_set(result, "next")
    assert (nxt.lock_wait_declared, nxt.finished_at) == (30, 50)


def test_the_watchdog_stops_a_recipe_blocked_on_a_plan_lock():
    blocked = {"duration": 50, "lock_plan": [plan("storage:nfs1", 10, 5)]}
    data = {
        **lab(),
        "jobs": [
            job("holder", 0, {"duration": 200}, locks=NFS_X),
            job("w", 0, blocked, max_time=60),
        ],
    }
    result = run(data, "labq")
    w = the_set(result, "w")
    assert w.recipes[0].state is RecipeState.ABORTED
    assert (w.finished_at, w.lock_wait_run) == (60, 50)
    assert result.world.locking.table.waiters == []
    assert result.world.locking.table.holders() == {}


def test_an_aborted_recipe_releases_the_set_locks_for_the_next():
    data = {
        **lab(),
        "jobs": [
            job("bad", 0, {"duration": 30, "outcome": "abort"}, locks=NFS_X),
            job("next", 0, {"duration": 10}, locks=NFS_X),
        ],
    }
    result = run(data, "labq")
    assert the_set(result, "bad").recipes[0].state is RecipeState.ABORTED
    assert the_set(result, "next").finished_at == 40


@pytest.mark.parametrize("at", [5, 50])  # waiting for its declared locks, or running
def test_a_cancelled_set_lets_go_of_its_locks_and_its_wait(at):
    data = {
        **lab(),
        "jobs": [
            job("holder", 0, {"duration": 100}, locks=NFS_X),
            job("waiter", 0, {"duration": 10}, locks=NFS_X),
            job("third", 1, {"duration": 10}, locks=NFS_X),
        ],
        "events": [{"at": at, "cancel": "waiter" if at == 5 else "holder"}],
    }
    result = run(data, "labq-fifo")
    third = the_set(result, "third")
    if at == 5:  # the waiter leaves the queue: third no longer waits behind it
        assert the_set(result, "waiter").lock_wait_declared == 5
        assert third.finished_at == 110
    else:  # the holder stops at 50: the waiter, then third
        assert the_set(result, "waiter").finished_at == 60
        assert third.finished_at == 70
    assert result.world.locking.table.holders() == {}


def test_a_retry_keeps_the_locks_and_plan():
    recipe = {"duration": 20, "outcome": {"abort_on": ["n-1.lab"]}, "force": None}
    recipe["lock_plan"] = [plan("storage:nfs1", 5, 5)]
    data = {**lab(2), "jobs": [job("r", 0, recipe, locks=NFS_X, max_retries=1)]}
    world = run(data, "labq").world
    attempts = [world.sets[i] for i in world.jobs["r"]]
    assert len(attempts) == 2
    assert attempts[1].locks == attempts[0].locks
    assert attempts[1].recipes[0].plan == attempts[0].recipes[0].plan


# --- the running limit ---------------------------------------------------------------------


def test_running_limits_hold_and_lock_waiters_count_against_them():
    jobs = [job("x", 0, {"duration": 100}, locks=NFS_X)]
    jobs += [job(f"j{i}", 1, {"duration": 10}, locks=NFS_X) for i in range(4)]
    result = run({**lab(8, lab_running_limits={"lab": 2}), "jobs": jobs}, "labq-fifo")
    assert result.world.lab_running_peak["lab"] == 2
    first = min((the_set(result, f"j{i}") for i in range(4)), key=lambda s: s.started_at or 0)
    assert first.started_at == 1  # started into the second slot, to wait there for nfs1
    assert first.lock_wait_declared == 99


# --- reports --------------------------------------------------------------------------------


def test_reports_show_lock_waiting_per_set_and_in_total():
    data = {
        **lab(),
        "jobs": [
            job("a", 0, {"duration": 100}, locks=NFS_X),
            job("b", 10, {"duration": 50, "lock_plan": [plan("storage:nfs1", 5, 5)]}),
        ],
    }
    result = run(data, "labq")
    body = json.loads(json.dumps(run_report(result)))
    assert body["metrics"]["lock_waiting"] == {
        "total": 85.0,
        "declared": 0.0,
        "run": 85.0,
        "sets": 1,
        "max": 85.0,
        "refused": 0,
    }
    b = next(row for row in body["recipe_sets"] if row["job"] == "b")
    assert (b["lock_wait"], b["lock_wait_declared"], b["lock_wait_run"]) == (85, 0, 85)
    assert b["lab"] == "lab"
    assert next(r for r in body["recipes"] if r["job"] == "b")["lock_wait"] == 85
    compared = compare_report([result])["policies"][0]
    assert compared["lock_waiting"]["total"] == 85
    console = Console(record=True, width=120)
    print_run(result, console)
    text = console.export_text()
    assert "lock waiting, total" in text
    assert "b set 0 attempt 1: 85 s (declared locks 0 s, lock plan 85 s)" in text


# --- the example: the "Done when" of issue 5 -------------------------------------------------


def test_predictive_order_waits_less_for_locks_than_fifo_on_the_example():
    scenario, files = load_scenario(EXAMPLE)
    waits = {}
    for policy in ("labq", "labq-fifo"):
        result = simulate(scenario, files, policy, 0)
        assert all(r.finished_at is not None for r in result.world.sets.values())
        assert result.world.lab_running_peak["lab1"] <= 4
        waits[policy] = lock_waits(result.world).total
    assert waits["labq"] < waits["labq-fifo"]


# --- properties -------------------------------------------------------------------------------

LEVEL_NAMES = {"storage": ["nfs1", "nfs2", "*"], "network": ["vlan7", "vlan8"]}


def locked_scenario(seed: int) -> dict[str, Any]:
    """Two labs, running limits, and sets that declare and take locks of every kind."""
    rng = random.Random(seed)
    systems = [
        {"fqdn": f"s{i}", "lab": rng.choice(["east", "west"])} for i in range(rng.randint(3, 8))
    ]
    jobs = [_locked_job(rng, j) for j in range(rng.randint(4, 20))]
    events = [
        {"at": rng.uniform(0, 400), "cancel": job_["id"]}
        for job_ in rng.sample(jobs, k=min(len(jobs), rng.choice([0, 1, 2])))
    ]
    limits = {lab_: rng.randint(1, 3) for lab_ in {s["lab"] for s in systems} if rng.random() < 0.7}
    queue: dict[str, Any] = {"lab_running_limits": limits}
    if rng.random() < 0.5:
        queue["running_limit"] = rng.randint(1, 4)
    return {
        "config": {"queue": queue, "install_time": rng.choice([0, 10])},
        "systems": systems,
        "jobs": jobs,
        "events": events,
    }


def _locked_job(rng: random.Random, j: int) -> dict[str, Any]:
    recipes = []
    for _ in range(rng.choice([1, 1, 2])):
        duration = rng.uniform(10, 200)
        steps = []
        for _ in range(rng.choice([0, 1, 2])):
            level = rng.choice(sorted(LEVEL_NAMES))
            at = rng.uniform(0, duration * 0.8)
            hold = rng.uniform(1, duration - at)
            steps.append(plan(f"{level}:{rng.choice(LEVEL_NAMES[level])}", at, hold))
            steps[-1]["exclusive"] = rng.random() < 0.5
        recipes.append({"duration": duration, "lock_plan": steps})
    locks: dict[str, Any] = {}
    for level, names in LEVEL_NAMES.items():
        mode = rng.choice(["shared", "exclusive"])
        locks[level] = rng.choice(
            ["none", {mode: rng.sample(names[:-1], k=1)}, {mode: "unknown"}, {mode: "all"}]
        )
    if rng.random() < 0.1:
        locks["whole_lab"] = True
    recipe_set: dict[str, Any] = {"locks": locks, "recipes": recipes}
    if rng.random() < 0.3:
        recipe_set["max_time"] = rng.uniform(20, 300)
    return {"id": f"j{j}", "submit_at": rng.uniform(0, 300), "recipe_sets": [recipe_set]}


def check_locks(result: Run) -> None:
    """No two sets ever hold conflicting locks; every wait ends; limits hold under labq."""
    holding: dict[int, tuple[Grant, ...]] = {}
    for time, owner, grants in result.world.locking.history:
        holding[owner] = grants
        for other, theirs in holding.items():
            if other != owner:
                clash = [(a, b) for a in grants for b in theirs if a.conflicts(b)]
                assert not clash, f"{result.policy} at {time}: sets {owner}, {other}: {clash}"
    world = result.world
    for set_run in world.sets.values():
        if set_run.started_at is not None:
            assert set_run.finished_at is not None, f"set {set_run.id} never ended"
            assert set_run.lock_wait <= set_run.finished_at - set_run.started_at + 1e-6
    assert world.locking.table.holders() == {}
    assert world.locking.table.waiters == []
    if result.policy.startswith("labq"):
        config = world.policy.config  # type: ignore[attr-defined]
        if config.running_limit is not None:
            assert world.running_peak <= config.running_limit
        for lab_, limit in config.lab_running_limits:
            assert world.lab_running_peak[lab_] <= limit


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_locks_never_conflict_and_running_limits_hold(seed):
    data = locked_scenario(seed)
    for policy in ("labq", "labq-fifo", "easy"):
        check_locks(run(data, policy, seed))


@pytest.mark.parametrize("policy", sorted(registry()))
def test_every_policy_honours_the_locks(policy):
    for seed in range(4):
        check_locks(run(locked_scenario(seed), policy, seed))
