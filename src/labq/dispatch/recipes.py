"""The set runner's record of each recipe: where its tasks run, and what became of it."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from labq.dispatch.backends import Backend
from labq.dispatch.plan import GuestPlan, RecipePlan, SystemInfo
from labq.dispatch.results import TaskOutcome
from labq.dispatch.stopping import Stop, StopKind
from labq.domain.states import RecipeState


@dataclass(frozen=True)
class Place:
    """Where a task runs: a recipe's system or one of its guests."""

    system: SystemInfo
    log_dir: Path
    role: str | None
    guest: GuestPlan | None = None


@dataclass
class Guest:
    """A guest of a recipe's system, and whether it was begun."""

    plan: GuestPlan
    log_dir: Path
    made: bool = False  # guest_create began: destroy it at the end

    @property
    def place(self) -> Place:
        return Place(self.plan.system, self.log_dir, self.plan.role, self.plan)


@dataclass
class RecipeRun:
    """One recipe of the running set: its backend, its guests and how far it got."""

    plan: RecipePlan
    backend: Backend | None  # None: the set never started
    log_dir: Path
    guests: list[Guest] = field(default_factory=list)
    touched: bool = False  # provisioning began, so there is something to archive and clean
    tasks: list[TaskOutcome] = field(default_factory=list)
    reason: str | None = None  # why this recipe itself aborted
    finished: bool = False  # every task ran to its end
    cleaned_up: bool = False
    cleanup_error: str | None = None
    logs_error: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def label(self) -> str:
        return f"recipe {self.plan.id} on {self.plan.system.fqdn}"

    @property
    def place(self) -> Place:
        return Place(self.plan.system, self.log_dir, self.plan.role)

    def abort(self, reason: str) -> None:
        """Say why the recipe aborted, unless one of its threads said so first."""
        with self._lock:
            if self.reason is None:
                self.reason = reason


def final_state(r: RecipeRun, stop: Stop) -> tuple[RecipeState, str | None]:
    """How the recipe ends, and why (None for a completed one)."""
    if r.reason is not None:
        return RecipeState.ABORTED, r.reason
    if r.finished:
        return RecipeState.COMPLETED, None
    if stop.kind is StopKind.CANCEL:
        return RecipeState.CANCELLED, stop.reason
    if stop.kind is StopKind.MAX_TIME:
        return RecipeState.ABORTED, stop.reason
    return RecipeState.ABORTED, f"aborted with its recipe set: {stop.reason}"
