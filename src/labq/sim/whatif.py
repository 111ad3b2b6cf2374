"""What-if on a lab's own history: the same window under the current and a changed policy.

``labq sim lab.yaml --config new.yaml --compare current,new`` runs an exported
history (``labq sim export``) twice with labq's own policy: *current* under the
scenario's settings (the live ones at export time), *new* with the settings
file laid over them. This module adds what a plain comparison lacks: the
figures per group and per pool side by side, and the *fidelity* of the
current run — how closely replaying the history reproduces what really
happened (each recipe's ``recorded`` start and system).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from labq.sim.runner import Run
from labq.sim.runs import SetRun
from labq.sim.scenario import Scenario

NAMES: Final = ("current", "new")
TAU: Final = 10.0  # seconds: the bound of the bounded slowdown (as labq.sim.metrics)
TOLERANCE: Final = 0.5  # seconds: a replayed start this close to the recorded one matches
SHOWN: Final = 10  # mismatches listed


@dataclass(frozen=True)
class Miss:
    """A set the replay did not start on time: times in seconds from the window's start."""

    job: str
    index: int
    recorded: float
    systems: list[str | None]
    replayed: float | None
    ran: list[str | None]


@dataclass
class Fidelity:
    """How closely a replay under the current settings reproduced the recorded schedule."""

    sets: int = 0  # first attempts with a recorded start
    on_time: int = 0  # replayed within the tolerance of their recorded start
    same_systems: int = 0  # placed on the systems they really ran on
    tolerance: float = TOLERANCE
    mismatches: list[str] = field(default_factory=list)
    misses: list[Miss] = field(default_factory=list)  # the same, as values (for the web page)

    @property
    def share(self) -> float:
        """The share of sets replayed on time (1.0 when there were none)."""
        return 1.0 if self.sets == 0 else self.on_time / self.sets

    def as_json(self) -> dict[str, Any]:
        """For ``--json``."""
        return {
            "sets": self.sets,
            "on_time": self.on_time,
            "share_on_time": round(self.share, 4),
            "same_systems": self.same_systems,
            "tolerance_s": self.tolerance,
            "mismatches": self.mismatches[:SHOWN],
        }


def fidelity(run: Run, tolerance: float = TOLERANCE) -> Fidelity:
    """Each set's first attempt against its recipes' ``recorded`` start and systems."""
    found = Fidelity(tolerance=tolerance)
    recorded = _recorded(run.scenario)
    for attempt in sorted(run.world.sets.values(), key=lambda r: r.id):
        key = (attempt.job, attempt.index)
        if attempt.attempt != 1 or key not in recorded:
            continue
        start, systems = recorded[key]
        found.sets += 1
        replayed = attempt.started_at
        ran = [r.ran_on for r in attempt.recipes]
        if ran == systems:
            found.same_systems += 1
        if replayed is not None and abs(replayed - start) <= tolerance:
            found.on_time += 1
            continue
        found.misses.append(Miss(attempt.job, attempt.index, start, systems, replayed, ran))
        when = "never" if replayed is None else f"at {replayed:.1f} s"
        found.mismatches.append(
            f"{attempt.job} set {attempt.index}: recorded at {start:.1f} s on"
            f" {', '.join(s or '?' for s in systems)}; replayed {when}"
            + ("" if ran == systems else f" on {', '.join(s or '?' for s in ran)}")
        )
    return found


def _recorded(scenario: Scenario) -> dict[tuple[str, int], tuple[float, list[str | None]]]:
    out = {}
    for job in scenario.jobs:
        for index, rs in enumerate(job.recipe_sets or ()):
            marks = [r.recorded for r in rs.recipes]
            if marks and all(m is not None for m in marks):
                out[job.id, index] = (
                    min(m.start for m in marks if m is not None),
                    [m.system for m in marks if m is not None],
                )
    return out


@dataclass(frozen=True)
class Cut:
    """The figures of one group or pool in one run."""

    sets: int
    mean_wait: float
    mean_bounded_slowdown: float
    retries: int
    lock_wait: float
    busy_hours: float
    held_hours: float  # systems held for sets still waiting for the rest of their systems


def by_group(run: Run) -> dict[str, Cut]:
    """Per group (``everybody`` for jobs without one)."""
    return _cuts(run, lambda attempt: [attempt.group or "everybody"])


def by_pool(run: Run) -> dict[str, Cut]:
    """Per pool of the systems a set ran on (a set counts in each; ``(no pool)`` too)."""
    pools = {s.fqdn: s.pools or ["(no pool)"] for s in run.scenario.all_systems()}

    def keys(attempt: SetRun) -> list[str]:
        ran = {r.ran_on for r in attempt.recipes if r.ran_on is not None}
        return sorted({p for fqdn in ran for p in pools.get(fqdn, ["(no pool)"])})

    return _cuts(run, keys)


def _cuts(run: Run, keys: Any) -> dict[str, Cut]:
    grouped: dict[str, list[SetRun]] = defaultdict(list)
    for attempt in run.world.sets.values():
        for key in keys(attempt):
            grouped[key].append(attempt)
    out = {}
    for key, attempts in sorted(grouped.items()):
        started = [a for a in attempts if a.started_at is not None]
        waits = [(a.started_at or 0.0) - a.submitted for a in started]
        slowdowns = [_slowdown(a) for a in started]
        busy = sum(
            ((r.finished_at or 0.0) - (r.scheduled_at or 0.0))
            for a in started
            for r in a.recipes
            if r.finished_at is not None and r.scheduled_at is not None
        )
        held = sum(
            max(0.0, (a.started_at or 0.0) - r.scheduled_at)
            for a in started
            for r in a.recipes
            if r.scheduled_at is not None
        )
        out[key] = Cut(
            sets=len(attempts),
            mean_wait=sum(waits) / len(waits) if waits else 0.0,
            mean_bounded_slowdown=sum(slowdowns) / len(slowdowns) if slowdowns else 0.0,
            retries=sum(1 for a in attempts if a.attempt > 1),
            lock_wait=sum(a.lock_wait for a in attempts),
            busy_hours=busy / 3600,
            held_hours=held / 3600,
        )
    return out


def _slowdown(attempt: SetRun) -> float:
    began = attempt.started_at or attempt.submitted
    ran = max((attempt.finished_at or began) - began, 0.0)
    return max((began - attempt.submitted + ran) / max(ran, TAU), 1.0)


def cuts_json(runs: list[Run]) -> dict[str, Any]:
    """Per group and per pool, each run's figures (``--json``)."""
    return {
        "groups": _side_by_side({r.policy: by_group(r) for r in runs}),
        "pools": _side_by_side({r.policy: by_pool(r) for r in runs}),
    }


def _side_by_side(per_run: Mapping[str, dict[str, Cut]]) -> dict[str, dict[str, Any]]:
    keys = sorted({k for cuts in per_run.values() for k in cuts})
    return {
        key: {name: (vars(cuts[key]) if key in cuts else None) for name, cuts in per_run.items()}
        for key in keys
    }
