"""What a simulation is judged by: waits, slowdowns, utilisation, fairness, stuck sets."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from labq.domain.states import Condition, RecipeState, Usage
from labq.domain.usage import time_in_usage
from labq.scheduler.placement import gang_match, is_complete
from labq.sim.runs import SetRun
from labq.sim.world import World

TAU: Final = 10.0  # seconds: the bound of the bounded slowdown
WORKING: Final = frozenset({Usage.INSTALLING, Usage.RUNNING})


@dataclass(frozen=True)
class Metrics:
    """The headline numbers of one run."""

    sets: int
    started: int
    stuck: int  # sets never started when the run ended: they count as waiting until then
    mean_wait: float
    p95_wait: float
    max_wait: float
    mean_bounded_slowdown: float
    utilization: float
    makespan: float
    jain_fairness: float
    group_mean_slowdown: dict[str, float]
    locks: LockWaits


@dataclass(frozen=True)
class LockWaits:
    """Time started sets spent ``waiting`` for locks (seed 004), summed over set attempts."""

    total: float  # declared + at run time
    declared: float  # from start until the set's declared locks were granted
    run: float  # while some recipe of the set was blocked on a lock of its plan
    sets: int  # set attempts that waited at all
    max: float  # the longest wait of one set attempt
    refused: int  # plan steps refused because waiting would deadlock


def lock_waits(world: World) -> LockWaits:
    """Lock waiting over every set attempt."""
    runs = list(world.sets.values())
    waits = [r.lock_wait for r in runs]
    return LockWaits(
        total=sum(waits),
        declared=sum(r.lock_wait_declared for r in runs),
        run=sum(r.lock_wait_run for r in runs),
        sets=sum(1 for w in waits if w > 0),
        max=max(waits, default=0.0),
        refused=world.locking.refused,
    )


def measure(world: World, until: float | None = None) -> Metrics:
    """Metrics over every set attempt that started, and every stuck one.

    A stuck set counts as waiting until ``until`` (default: when the run ended),
    and the makespan runs to it: a policy that strands sets must not look better
    for leaving them out. A comparison passes the latest end of all its runs, so
    a stuck set waits at least as long as it did under any other policy.
    """
    started = [r for r in world.sets.values() if r.started_at is not None]
    stranded = stuck_sets(world)
    end = max(ended(world), until) if until is not None else ended(world)
    waits = sorted([_wait(r) for r in started] + [end - r.submitted for r in stranded])
    slowdowns = [_bounded_slowdown(r) for r in started]
    slowdowns += [_stuck_slowdown(r, end) for r in stranded]
    by_group: dict[str, list[float]] = {}
    for run, slowdown in zip(started + stranded, slowdowns, strict=True):
        by_group.setdefault(run.group or "everybody", []).append(slowdown)
    group_means = {g: sum(v) / len(v) for g, v in sorted(by_group.items())}
    first = min((r.submitted for r in world.sets.values()), default=0.0)
    last = max((r.finished_at or r.submitted for r in world.sets.values()), default=0.0)
    if stranded:
        last = max(last, end)
    return Metrics(
        sets=len(world.sets),
        started=len(started),
        stuck=len(stranded),
        mean_wait=_mean(waits),
        p95_wait=_percentile(waits, 0.95),
        max_wait=waits[-1] if waits else 0.0,
        mean_bounded_slowdown=_mean(slowdowns),
        utilization=utilization(world, first, last),
        makespan=last - first,
        jain_fairness=jain(list(group_means.values())),
        group_mean_slowdown=group_means,
        locks=lock_waits(world),
    )


def utilization(world: World, start: float, end: float) -> float:
    """The share of system time spent installing or running, over ``[start, end)``."""
    if end <= start:
        return 0.0
    totals = time_in_usage(world.ledger.history.rows, start, end, now=end)
    recorded = sum(totals.values())
    return sum(totals[u] for u in WORKING) / recorded if recorded else 0.0


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index: 1 when every group fares the same, 1/n at worst."""
    if not values:
        return 1.0
    square_sum = sum(v * v for v in values)
    return (sum(values) ** 2) / (len(values) * square_sum) if square_sum else 1.0


def _wait(run: SetRun) -> float:
    assert run.started_at is not None
    return run.started_at - run.submitted


def _bounded_slowdown(run: SetRun) -> float:
    assert run.started_at is not None
    end = run.finished_at if run.finished_at is not None else run.started_at
    runtime = end - run.started_at
    return max(1.0, (_wait(run) + runtime) / max(runtime, TAU))


def ended(world: World) -> float:
    """When the run ended: its last event, or the scenario's ``until``."""
    return world.ended if world.ended is not None else world.now


def _stuck_slowdown(run: SetRun, end: float) -> float:
    """A stuck set's slowdown as if it started at the end: its wait, then its recipes' time."""
    runtime = max((r.duration for r in run.recipes), default=0.0)
    return max(1.0, (end - run.submitted + runtime) / max(runtime, TAU))


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _percentile(ordered: Sequence[float], q: float) -> float:
    if not ordered:
        return 0.0
    rank = max(0, math.ceil(q * len(ordered)) - 1)
    return ordered[rank]


def stuck_sets(world: World) -> list[SetRun]:
    """Set attempts submitted that never started although the simulation ended."""
    return [
        run
        for run in world.waiting()
        if run.id in world.submitted and not any(r.state.is_final for r in run.recipes)
    ]


def stuck(world: World) -> list[dict[str, object]]:
    """Sets that never started although the simulation ended, and why."""
    out = []
    for run in stuck_sets(world):
        out.append(
            {
                "job": run.job,
                "recipe_set": run.index,
                "attempt": run.attempt,
                "reason": _why_stuck(world, run),
            }
        )
    return out


def _why_stuck(world: World, run: SetRun) -> str:
    holding = sorted(r.system for r in run.recipes if r.system is not None)
    held = ", ".join(holding) if holding else "nothing"
    if not _could_ever_run(world, run):
        return (
            "unsatisfiable: no lab has usable systems for every recipe of the set"
            f" (it waits for systems that are away), holding {held}"
        )
    states = ", ".join(sorted({r.state.value for r in run.recipes}))
    return f"could run but never started (deadlock or starvation): recipes {states}, holding {held}"


def _could_ever_run(world: World, run: SetRun) -> bool:
    from labq.domain.requirements import matches

    labs = {s.lab for s in world.ledger.systems.values()}
    for lab in sorted(labs):
        demands = {r.id: 1 for r in run.recipes}
        candidates = {
            r.id: [
                s.fqdn
                for s in world.ledger.systems.values()
                if s.lab == lab
                and s.condition is Condition.AUTOMATED  # broken and manual ones: it waits
                and s.fqdn not in r.excluded
                and world.access.maximum(s.pools, run.group) is not None
                and matches(r.requirement, s.facts())
            ]
            for r in run.recipes
        }
        if is_complete(demands, gang_match(demands, candidates)):
            return True
    return False


def recipe_rows(world: World) -> list[dict[str, object]]:
    """One row per recipe attempt, for the report."""
    rows = []
    for run in sorted(world.sets.values(), key=lambda r: r.id):
        for recipe in run.recipes:
            rows.append(
                {
                    "job": run.job,
                    "recipe_set": run.index,
                    "attempt": run.attempt,
                    "role": recipe.role,
                    "state": recipe.state.value,
                    "system": recipe.ran_on,
                    "submitted": run.submitted,
                    "scheduled": recipe.scheduled_at,
                    "started": recipe.started_at,
                    "finished": recipe.finished_at,
                    "result": recipe.result.value if recipe.result else None,
                    "lock_wait": recipe.lock_wait,
                }
            )
    return rows


def set_rows(world: World) -> list[dict[str, object]]:
    """One row per recipe set attempt, for the report."""
    from labq.domain.states import derived_state

    rows = []
    for run in sorted(world.sets.values(), key=lambda r: r.id):
        retry_of = world.sets[run.retry_of] if run.retry_of is not None else None
        rows.append(
            {
                "job": run.job,
                "index": run.index,
                "attempt": run.attempt,
                "retry_of": retry_of.attempt if retry_of else None,
                "state": derived_state(r.state for r in run.recipes).value,
                "error": run.error,
                "lab": run.lab,
                "submitted": run.submitted,
                "started": run.started_at,
                "finished": run.finished_at,
                "lock_wait": run.lock_wait,
                "lock_wait_declared": run.lock_wait_declared,
                "lock_wait_run": run.lock_wait_run,
                "waits_for": run.lock_waiting,
            }
        )
    return rows


__all__ = [
    "LockWaits",
    "Metrics",
    "RecipeState",
    "lock_waits",
    "measure",
    "recipe_rows",
    "set_rows",
    "stuck",
]
