"""The attempts the simulated world runs: one per recipe set, one per recipe in it.

Plain records that the world, its lock service and the metrics all read; they name
nothing of the simulator, so every part of it can name them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from labq.domain.contention import NO_NEEDS, LockNeeds
from labq.domain.distro import DistroRequirement
from labq.domain.locktable import Grant
from labq.domain.priority import Priority
from labq.domain.requirements import Requirement
from labq.domain.states import RecipeState, Result
from labq.scheduler.entries import RecipeSubmission, SetSubmission


@dataclass(frozen=True)
class LockStep:
    """One step of a recipe's lock plan: ``grant`` at ``at`` seconds of work, for ``hold`` s."""

    grant: Grant
    at: float
    hold: float


@dataclass
class RecipeRun:
    """One recipe attempt in the simulation."""

    id: int
    set_id: int
    role: str | None
    requirement: Requirement
    duration: float
    outcome: Any  # "pass" | "fail" | "abort" | list of fqdns to abort on
    excluded: frozenset[str] = frozenset()
    force: str | None = None
    plan: tuple[LockStep, ...] = ()  # its lock plan, in order of ``at``
    distro: DistroRequirement | None = None  # a tree its system's lab must carry
    state: RecipeState = RecipeState.NEW
    system: str | None = None
    ran_on: str | None = None  # the last system it was given; kept after it lets go
    scheduled_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    result: Result | None = None
    lock_wait: float = 0.0  # seconds its work was blocked on plan locks


@dataclass
class SetRun:
    """One recipe set attempt."""

    id: int
    job: str
    index: int
    attempt: int
    submitted: float
    priority: Priority
    group: str | None
    max_time: float | None
    max_retries: int
    recipes: list[RecipeRun]
    locks: LockNeeds = NO_NEEDS
    retry_of: int | None = None
    lab: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    error: str | None = None
    finish_token: int = 0
    stopping: bool = False  # asked to stop: its end is no longer rescheduled
    lock_wait_declared: float = 0.0  # seconds from start until its declared locks were granted
    lock_wait_run: float = 0.0  # seconds some recipe of it was blocked on a plan lock
    lock_waiting: str | None = None  # what it waits on now, in plain words
    predicted: float | None = None  # the run time the policy is told to expect (sim/predicting.py)
    signature: tuple[tuple[str, str], ...] = ()  # the kind of work (domain/prediction.py)

    @property
    def lock_wait(self) -> float:
        """Seconds spent waiting for locks, declared and at run time."""
        return self.lock_wait_declared + self.lock_wait_run

    def submission(self) -> SetSubmission:
        """What the policy is told about this set."""
        return SetSubmission(
            id=self.id,
            job=hash(self.job) & 0x7FFFFFFF,
            recipes=tuple(
                RecipeSubmission(r.id, r.requirement, r.role, r.excluded, r.force, r.distro)
                for r in self.recipes
            ),
            priority=self.priority,
            submitted=self.submitted,
            group=self.group,
            max_time=self.max_time,
            max_retries=self.max_retries,
            attempt=self.attempt,
            retry_of=self.retry_of,
            locks=self.locks,
            predicted=self.predicted,
        )
