"""What the repository hands back: plain frozen values, never live rows.

Recipe-set and job states are properties computed from the recipes
(:func:`derived_state`): they are never stored, so they can never disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from labq.domain.contention import NO_NEEDS, LockNeeds
from labq.domain.distro import DistroRequirement
from labq.domain.job import JobSpec, RecipeSetSpec
from labq.domain.model import User
from labq.domain.priority import Priority
from labq.domain.requirements import Requirement
from labq.domain.states import (
    RecipeState,
    Result,
    derived_state,
    job_state,
    retry_owed,
    worst_result,
)

T = TypeVar("T")


@dataclass(frozen=True)
class TaskView:
    """A stored task and how it went, as its supervisor reported."""

    id: int
    name: str
    status: str
    result: Result | None
    exit_code: int | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    log_path: str | None = None
    message: str | None = None
    guest: str | None = None  # the guest recipe it belongs to (its name or guest<N>), if any


@dataclass(frozen=True)
class RecipeView:
    """A stored recipe: its state, the system it holds (or ran on) and when it moved."""

    id: int
    recipe_set_id: int
    position: int
    state: RecipeState
    system: str | None
    result: Result | None
    queued_at: datetime | None
    scheduled_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    tasks: tuple[TaskView, ...] = ()
    log_dir: str | None = None


@dataclass(frozen=True)
class RecipeSetView:
    """A stored recipe set; ``retry_of`` is the set it retries (seed 003).

    ``lab`` and ``started_at`` are set when it starts, ``finished_at`` when its
    last recipe ends; the ``supervisor_*`` fields say who runs it.
    """

    id: int
    job_id: int
    position: int
    attempt: int
    retry_of: int | None
    error: str | None
    spec: RecipeSetSpec
    recipes: tuple[RecipeView, ...]
    submitted_at: datetime | None = None
    lab: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    supervisor_pid: int | None = None
    supervisor_host: str | None = None
    heartbeat_at: datetime | None = None
    stop_reason: str | None = None
    extended: int = 0  # seconds its max_time was extended by while it ran

    @property
    def state(self) -> RecipeState:
        """Derived from the recipes, never stored."""
        return derived_state(r.state for r in self.recipes)

    @property
    def result(self) -> Result | None:
        """The worst result of its recipes."""
        return worst_result(r.result for r in self.recipes)

    @property
    def retry_owed(self) -> bool:
        """Ended aborted and may yet be retried: the scheduler has not decided yet."""
        return retry_owed(
            ((r.state, r.system is not None) for r in self.recipes),
            attempt=self.attempt,
            max_retries=self.spec.max_retries,
            error=self.error,
        )


@dataclass(frozen=True)
class JobView:
    """A stored job: the spec as submitted (owner filled in) plus every set, retries included."""

    id: int
    owner: str
    group: str | None
    submitted_at: datetime
    source_format: str
    spec: JobSpec
    sets: tuple[RecipeSetView, ...]
    cloned_from: int | None = None  # the job this one was cloned from

    @property
    def current_sets(self) -> tuple[RecipeSetView, ...]:
        """The latest attempt of each set: a retried set is superseded by its clone."""
        return tuple(current_attempts(self.sets, key=lambda s: (s.id, s.retry_of)))

    @property
    def state(self) -> RecipeState:
        """Derived from the recipes of the current attempts, never stored.

        Not final while a retry is owed to a set (:func:`job_state`).
        """
        # each set's own facts first: the rule below never calls back into the views
        facts = [([r.state for r in s.recipes], s.retry_owed) for s in self.current_sets]
        return job_state(facts)

    @property
    def result(self) -> Result | None:
        """The worst result of the current attempts."""
        return worst_result([s.result for s in self.current_sets])  # own facts first, as in state


@dataclass(frozen=True)
class ActivityEntry:
    """One line of the activity log: who did what to which object, and why."""

    at: datetime
    actor: str
    object_kind: str
    object_id: int | None
    object_name: str | None
    action: str
    old_value: str | None
    new_value: str | None
    reason: str | None


@dataclass(frozen=True)
class HistoryEntry:
    """One move of a recipe: the state it entered, when, and why if a reason was given."""

    state: RecipeState
    at: datetime
    reason: str | None


@dataclass(frozen=True)
class TokenView:
    """An API token as listed: never its secret, which is not stored."""

    id: int
    user: str
    name: str
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None
    recipe_set: int | None
    set_ended_at: datetime | None = None  # a set's own token stops working when its set ends

    def valid_at(self, now: datetime) -> bool:
        """Not revoked, not expired and (a set's own token) its set not ended at ``now``."""
        ended = self.set_ended_at is not None and self.set_ended_at <= now
        return (
            self.revoked_at is None
            and not ended
            and (self.expires_at is None or now < self.expires_at)
        )


@dataclass(frozen=True)
class Credential:
    """Who a token speaks for; a set's own token is limited to that set."""

    token_id: int
    user: User
    recipe_set: int | None


@dataclass(frozen=True)
class UnfinishedRecipe:
    """A recipe of an unfinished set, as the scheduler rebuilds it."""

    id: int
    position: int
    role: str | None
    requirement: Requirement
    excluded: frozenset[str]
    force: str | None
    state: RecipeState
    system: str | None  # held, or (once ended) where it ran
    scheduled_at: datetime | None
    distro: DistroRequirement | None = None  # a catalogue tree its system's lab must carry
    keeps: int = 0  # seconds its <reservesys> may keep its system once it ends


@dataclass(frozen=True)
class UnfinishedSet:
    """A set whose recipes have not all ended: what the scheduler needs to rebuild it."""

    id: int
    job: int
    group: str | None
    priority: Priority
    submitted_at: datetime
    max_time: int | None
    max_retries: int
    attempt: int
    retry_of: int | None
    lab: str | None  # the lab it started in
    started_at: datetime | None
    recipes: tuple[UnfinishedRecipe, ...]
    locks: LockNeeds = NO_NEEDS
    blocked: str | None = None  # why it may not run yet (a dependency, a filter); waiting only
    buckets: tuple[tuple[str, int], ...] = ()  # rate-limit buckets (filters, reason)
    # what its run-time prediction is looked up by (labq.domain.runkind), and the one kept
    source_key: str | None = None
    work_key: str | None = None
    owner: str = ""
    prediction: Mapping[str, Any] | None = None

    @property
    def state(self) -> RecipeState:
        """Derived from the recipes, never stored."""
        return derived_state(r.state for r in self.recipes)


def current_attempts(items: Iterable[T], *, key: Callable[[T], tuple[int, int | None]]) -> list[T]:
    """The items no other item retries; ``key`` gives ``(id, retry_of)``."""
    listed = list(items)
    retried = {key(i)[1] for i in listed}
    return [i for i in listed if key(i)[0] not in retried]
