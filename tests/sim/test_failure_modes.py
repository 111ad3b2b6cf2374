"""Each baseline shows the failure its seed describes, and labq does not."""

from __future__ import annotations

from typing import Any

import pytest

from labq.sim.metrics import stuck

from .helpers import job, run, started, the_set


def abba() -> dict[str, Any]:
    """Two two-host sets need a and b; the urgent one comes after the first holds b."""
    return {
        "config": {"poll_every": 60},
        "systems": [{"fqdn": "a", "lab": "lab"}, {"fqdn": "b", "lab": "lab"}],
        "jobs": [
            job("busy-a", 0, {"host": {"fqdn": "a"}, "duration": 100}),
            job("busy-b", 0, {"host": {"fqdn": "b"}, "duration": 50}),
            job(
                "first",
                10,
                {"host": {"fqdn": "a"}, "duration": 300},
                {"host": {"fqdn": "b"}, "duration": 300},
            ),
            job(
                "urgent",
                70,
                {"host": {"fqdn": "b"}, "duration": 300},
                {"host": {"fqdn": "a"}, "duration": 300},
                priority="urgent",
            ),
        ],
    }


def test_beaker_batch_deadlocks_on_abba():
    result = run(abba(), "beaker-batch")
    blocked = stuck(result.world)
    assert sorted(item["job"] for item in blocked) == ["first", "urgent"]
    assert all("deadlock" in str(item["reason"]) for item in blocked)
    held = {r.system for name in ("first", "urgent") for r in the_set(result, name).recipes}
    assert held == {"a", "b", None}  # each holds one system and waits for the other's


def test_labq_finishes_abba():
    result = run(abba(), "labq")
    assert stuck(result.world) == []
    assert all(s.finished_at is not None for s in result.world.sets.values())
    assert started(result, "urgent") == 100.0  # it outranks first and takes b back


def queue_jumping() -> dict[str, Any]:
    """The rare system frees at 100, when a low-priority job wanting it arrives."""
    gpu = {"host": {"gpu": True}}
    return {
        "config": {"poll_every": 60},
        "systems": [
            {"fqdn": "gpu", "lab": "lab", "attrs": {"gpu": True}},
            {"fqdn": "cpu", "lab": "lab", "count": 2},
        ],
        "jobs": [
            job("busy", 0, {**gpu, "duration": 100}),
            job("high", 10, {**gpu, "duration": 300}, priority="high"),
            job("late-low", 100, {**gpu, "duration": 500}, priority="low"),
        ],
    }


def test_beaker_batch_lets_a_new_low_job_jump_the_queue():
    result = run(queue_jumping(), "beaker-batch")
    assert started(result, "late-low") == 100.0
    assert started(result, "high") == 600.0


def test_labq_gives_the_rare_system_to_the_waiting_high_job():
    result = run(queue_jumping(), "labq")
    assert started(result, "high") == 100.0
    assert started(result, "late-low") == 400.0


def starvation(stream_end: float = 2000.0) -> dict[str, Any]:
    """Five nodes; a five-node job amid one-node jobs every 25 s lasting 100 s, same priority."""
    node = {"host": {"machine_type": "smithi"}}
    small = [
        job(f"small-{i}", i * 25.0, {**node, "duration": 100}, priority="low")
        for i in range(int(stream_end // 25) + 1)
    ]
    big = job("big", 5, *([{**node, "duration": 300}] * 5), priority="low")
    return {
        "config": {"poll_every": 10},
        "systems": [
            {"fqdn": "smithi", "lab": "sepia", "count": 5, "attrs": {"machine_type": "smithi"}}
        ],
        "jobs": [big, *small],
    }


def test_teuthology_workers_starve_the_big_job_until_the_stream_ends():
    result = run(starvation(), "teuthology-workers")
    begun = started(result, "big")
    assert begun is not None
    assert begun >= 2000.0


@pytest.mark.parametrize("policy", ["labq", "teuthology-dispatcher"])
def test_holding_policies_start_the_big_job_promptly(policy):
    result = run(starvation(), policy)
    begun = started(result, "big")
    assert begun is not None
    assert begun <= 100.0  # as soon as the one-node job that was running at 5 ends


def test_teuthology_dispatcher_keeps_priority_order_with_head_of_line_blocking():
    # x needs both nodes (one is busy until 100); y fits now but must wait behind x
    data = {
        "systems": [{"fqdn": "n", "lab": "lab", "count": 2}],
        "jobs": [
            job("busy", 0, {"duration": 100}),
            job("x", 1, {"duration": 50}, {"duration": 50}),
            job("y", 2, {"duration": 10}),
        ],
    }
    result = run(data, "teuthology-dispatcher")
    assert started(result, "x") == 100.0
    assert started(result, "y") == 150.0
    # workers take whatever fits, at their next poll
    assert started(run(data, "teuthology-workers"), "y") == 60.0


def backfill() -> dict[str, Any]:
    """Four nodes: `long` holds two until 1000; `wide` needs all four."""
    return {
        "systems": [{"fqdn": "n", "lab": "lab", "count": 4}],
        "jobs": [
            job("long", 0, {"duration": 1000}, {"duration": 1000}, max_time=1000),
            job("wide", 1, *([{"duration": 100}] * 4), max_time=100),
            job("short", 2, {"duration": 500}, max_time=500),  # ends before 1000: backfills
            job("too-long", 3, {"duration": 2000}, max_time=2000),  # would delay wide
            job("undeclared", 4, {"duration": 5}),  # no max_time: cannot prove it ends in time
        ],
    }


def test_easy_backfills_only_what_does_not_delay_the_head():
    result = run(backfill(), "easy")
    assert started(result, "short") == 2.0
    assert started(result, "wide") == 1000.0
    assert started(result, "too-long") == 1100.0
    assert started(result, "undeclared") == 1100.0


def test_easy_backfills_onto_systems_the_head_does_not_need():
    # the head needs two nodes at its shadow time; a fourth node is spare for anyone
    data = {
        "systems": [{"fqdn": "n", "lab": "lab", "count": 4}],
        "jobs": [
            job("long", 0, *([{"duration": 1000}] * 3), max_time=1000),
            job("pair", 1, {"duration": 100}, {"duration": 100}, max_time=100),
            job("forever", 2, {"duration": 5000}),  # one node: spare even at the shadow time
        ],
    }
    result = run(data, "easy")
    assert started(result, "forever") == 2.0
    assert started(result, "pair") == 1000.0


def test_dispatcher_never_backfills():
    result = run(backfill(), "teuthology-dispatcher")
    assert started(result, "short") == 1100.0  # behind wide, which waits for long


def test_workers_can_be_fewer_than_systems(monkeypatch):
    from labq.sim import baselines
    from labq.sim.baselines.teuthology_workers import TeuthologyWorkers

    def one_worker(config, access, rng):
        return TeuthologyWorkers(config, access, rng, workers=1)

    monkeypatch.setitem(baselines.BASELINES, "one-worker", one_worker)
    data = {
        "config": {"poll_every": 10},
        "systems": [{"fqdn": "n", "lab": "lab", "count": 4}],
        "jobs": [job(f"j{i}", 0, {"duration": 100}) for i in range(4)],
    }
    result = run(data, "one-worker")
    starts = sorted(s.started_at for s in result.world.sets.values() if s.started_at is not None)
    assert starts == [0.0, 100.0, 200.0, 300.0]  # one worker runs one job at a time
