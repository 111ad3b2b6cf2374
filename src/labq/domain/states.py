"""Lifecycles as data: one table of allowed moves per state machine.

A move to the state something is already in is a no-op; a move the table does
not list raises :class:`IllegalTransition`. The store enforces the same table a
second time in its guarded ``UPDATE … WHERE state IN (…)``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Final, TypeVar

from labq.errors import IllegalTransition

S = TypeVar("S", bound=enum.Enum)


class RecipeState(enum.Enum):
    """Where a recipe is in its life. ``processed`` does not exist (seed 000)."""

    # members are singletons: hash by identity (Enum hashes the name in Python, and the
    # simulator moves recipes and systems millions of times)
    __hash__ = object.__hash__

    NEW = "new"
    QUEUED = "queued"
    ASSIGNED = "assigned"
    SCHEDULED = "scheduled"
    WAITING = "waiting"
    INSTALLING = "installing"
    RUNNING = "running"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    ABORTED = "aborted"

    @property
    def is_final(self) -> bool:
        """Completed, cancelled and aborted recipes never move again."""
        return self in FINAL_RECIPE_STATES

    @property
    def holds_system(self) -> bool:
        """Whether a recipe in this state has a system of its own."""
        return self in SYSTEM_HOLDING_STATES


class Usage(enum.Enum):
    """What a system is doing (seed 000's explicit usage state machine)."""

    # members are singletons: hash by identity (Enum hashes the name in Python, and the
    # simulator moves recipes and systems millions of times)
    __hash__ = object.__hash__

    IDLE = "idle"
    PENDING = "pending"
    SCHEDULED = "scheduled"
    WAITING = "waiting"
    INSTALLING = "installing"
    RUNNING = "running"


class Condition(enum.Enum):
    """How a system may be used, as its admin says."""

    # members are singletons: hash by identity (Enum hashes the name in Python, and the
    # simulator moves recipes and systems millions of times)
    __hash__ = object.__hash__

    AUTOMATED = "automated"
    MANUAL = "manual"
    BROKEN = "broken"
    REMOVED = "removed"


class Result(enum.Enum):
    """The outcome of a task, recipe, set or job; worse results sort higher."""

    PASS = "pass"  # noqa: S105 - a test result, not a password
    WARN = "warn"
    FAIL = "fail"

    @property
    def severity(self) -> int:
        """Rank for "the worst result wins"."""
        return _SEVERITY[self]


_SEVERITY: Final = {Result.PASS: 0, Result.WARN: 1, Result.FAIL: 2}

FINAL_RECIPE_STATES: Final = frozenset(
    {RecipeState.COMPLETED, RecipeState.CANCELLED, RecipeState.ABORTED}
)
SYSTEM_HOLDING_STATES: Final = frozenset(
    {RecipeState.SCHEDULED, RecipeState.WAITING, RecipeState.INSTALLING, RecipeState.RUNNING}
)
_ENDINGS: Final = frozenset({RecipeState.CANCELLED, RecipeState.ABORTED})

# DESIGN.md § Lifecycles. Two release moves are added for DESIGN.md § No deadlock:
# a held (scheduled, not started) recipe whose system a higher-ranked set takes
# goes back to `assigned`; a set left holding no system goes back to `queued`.
RECIPE_MOVES: Final[Mapping[RecipeState, frozenset[RecipeState]]] = {
    RecipeState.NEW: frozenset({RecipeState.QUEUED, RecipeState.ASSIGNED, RecipeState.SCHEDULED})
    | _ENDINGS,
    RecipeState.QUEUED: frozenset({RecipeState.ASSIGNED, RecipeState.SCHEDULED}) | _ENDINGS,
    RecipeState.ASSIGNED: frozenset({RecipeState.SCHEDULED, RecipeState.QUEUED}) | _ENDINGS,
    RecipeState.SCHEDULED: frozenset({RecipeState.WAITING, RecipeState.ASSIGNED}) | _ENDINGS,
    RecipeState.WAITING: frozenset({RecipeState.INSTALLING}) | _ENDINGS,
    RecipeState.INSTALLING: frozenset({RecipeState.RUNNING}) | _ENDINGS,
    RecipeState.RUNNING: frozenset({RecipeState.COMPLETED}) | _ENDINGS,
    RecipeState.COMPLETED: frozenset(),
    RecipeState.CANCELLED: frozenset(),
    RecipeState.ABORTED: frozenset(),
}

# A system becomes pending when added or made automated (from idle) and when its
# recipe ends (from any busy state); it drops to idle when nothing wants it or
# when its condition stops being automated, whatever it was doing.
USAGE_MOVES: Final[Mapping[Usage, frozenset[Usage]]] = {
    Usage.IDLE: frozenset({Usage.PENDING, Usage.SCHEDULED}),
    Usage.PENDING: frozenset({Usage.IDLE, Usage.SCHEDULED}),
    Usage.SCHEDULED: frozenset({Usage.WAITING, Usage.PENDING, Usage.IDLE}),
    Usage.WAITING: frozenset({Usage.INSTALLING, Usage.PENDING, Usage.IDLE}),
    Usage.INSTALLING: frozenset({Usage.RUNNING, Usage.PENDING, Usage.IDLE}),
    Usage.RUNNING: frozenset({Usage.PENDING, Usage.IDLE}),
}

# While a recipe holds a system, the system's usage mirrors the recipe's state.
MIRRORED_USAGE: Final[Mapping[RecipeState, Usage]] = {
    RecipeState.SCHEDULED: Usage.SCHEDULED,
    RecipeState.WAITING: Usage.WAITING,
    RecipeState.INSTALLING: Usage.INSTALLING,
    RecipeState.RUNNING: Usage.RUNNING,
}


def check_recipe_move(current: RecipeState, target: RecipeState) -> bool:
    """True when the move changes something, False for a repeat; raises if illegal."""
    return _check(RECIPE_MOVES, current, target, "recipe")


def check_usage_move(current: Usage, target: Usage) -> bool:
    """True when the move changes something, False for a repeat; raises if illegal."""
    return _check(USAGE_MOVES, current, target, "system usage")


def _check(table: Mapping[S, frozenset[S]], current: S, target: S, what: str) -> bool:
    if current is target:
        return False
    if target not in table[current]:
        raise IllegalTransition(f"{what} cannot move from {current.value} to {target.value}")
    return True


def recipe_predecessors(target: RecipeState) -> frozenset[RecipeState]:
    """Every state from which a recipe may move to ``target`` (for guarded updates)."""
    return frozenset(s for s, nexts in RECIPE_MOVES.items() if target in nexts)


def usage_predecessors(target: Usage) -> frozenset[Usage]:
    """Every usage from which a system may move to ``target`` (for guarded updates)."""
    return frozenset(s for s, nexts in USAGE_MOVES.items() if target in nexts)


_PROGRESS: Final = (
    RecipeState.NEW,
    RecipeState.QUEUED,
    RecipeState.ASSIGNED,
    RecipeState.SCHEDULED,
    RecipeState.WAITING,
    RecipeState.INSTALLING,
    RecipeState.RUNNING,
)
# derived_state as a minimum over this order: unfinished states by progress (the least
# advanced speaks for the whole), then aborted, cancelled, completed
DERIVED_ORDER: Final = (
    *_PROGRESS,
    RecipeState.ABORTED,
    RecipeState.CANCELLED,
    RecipeState.COMPLETED,
)


def derived_state(states: Iterable[RecipeState]) -> RecipeState:
    """The state of a recipe set or job, derived from its recipes' states.

    While anything is unfinished, the least advanced unfinished recipe speaks for
    the whole (a set is only as far along as its slowest member). Once all have
    ended: aborted if any aborted, else cancelled if any was, else completed.
    """
    seen = set(states)
    if not seen:
        return RecipeState.NEW
    unfinished = [s for s in _PROGRESS if s in seen]
    if unfinished:
        return unfinished[0]
    for ending in (RecipeState.ABORTED, RecipeState.CANCELLED):
        if ending in seen:
            return ending
    return RecipeState.COMPLETED


def retry_owed(
    recipes: Iterable[tuple[RecipeState, bool]],
    *,
    attempt: int,
    max_retries: int,
    error: str | None,
) -> bool:
    """Whether an ended set may yet be retried: the scheduler owes it a decision.

    ``recipes`` gives each recipe's state and whether it had a system. A set
    whose recipes have all ended, one aborted on a system and none cancelled,
    within its ``max_retries`` and with no error, gets a clone or an error from
    the scheduler (``scheduler.retry``) as soon as it hears the set ended. Until
    then its job has not ended: another attempt may follow.
    """
    listed = list(recipes)
    return (
        error is None
        and attempt - 1 < max_retries
        and all(state.is_final for state, _ in listed)
        and not any(state is RecipeState.CANCELLED for state, _ in listed)
        and any(state is RecipeState.ABORTED and placed for state, placed in listed)
    )


def job_state(sets: Iterable[tuple[Iterable[RecipeState], bool]]) -> RecipeState:
    """A job's state from its current attempts: each set's recipe states, and whether
    a retry is owed to it (:func:`retry_owed`).

    A set owed a retry counts as ``new``, the state its next attempt starts in, so
    a job ends only when no attempt can follow.
    """
    return derived_state(
        state for states, owed in sets for state in ((RecipeState.NEW,) if owed else states)
    )


def worst_result(results: Iterable[Result | None]) -> Result | None:
    """The worst of some results; None when none is known yet."""
    known = [r for r in results if r is not None]
    return max(known, key=lambda r: r.severity) if known else None
