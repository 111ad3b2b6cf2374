"""What the core decides. The caller commits each decision, then acts on it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Schedule:
    """Give ``system`` to ``recipe`` (the recipe becomes scheduled, the system too)."""

    recipe: int
    set: int
    system: str


@dataclass(frozen=True)
class Assign:
    """The recipe's set holds systems in a lab; this recipe waits there for its own."""

    recipe: int
    set: int


@dataclass(frozen=True)
class Enqueue:
    """The recipe waits in the queue (from new, or back from assigned)."""

    recipe: int
    set: int


@dataclass(frozen=True)
class Release:
    """Take ``system`` back from a held, not started recipe (it becomes assigned)."""

    recipe: int
    set: int
    system: str
    reason: str


@dataclass(frozen=True)
class Start:
    """Every recipe of the set has its system: hand the set on to run."""

    set: int
    lab: str


@dataclass(frozen=True)
class CreateVm:
    """Make a VM of ``size`` for the recipe on the lab's VM slot ``system`` as it starts
    (its creation is the recipe's installing; it is destroyed when the recipe ends)."""

    recipe: int
    set: int
    system: str
    lab: str
    size: str


@dataclass(frozen=True)
class Idle:
    """Nothing wants the pending system now."""

    system: str


@dataclass(frozen=True)
class Cancel:
    """The recipe is cancelled before it started."""

    recipe: int
    set: int


@dataclass(frozen=True)
class Abort:
    """The recipe is aborted, with a reason in plain words."""

    recipe: int
    set: int
    reason: str


@dataclass(frozen=True)
class Stop:
    """A started set must be stopped (cancelled while running)."""

    set: int
    reason: str


@dataclass(frozen=True)
class Retry:
    """Clone the ended set onto its job, excluding the systems recipes aborted on."""

    set: int
    attempt: int
    excluded: Mapping[int, frozenset[str]]  # recipe index -> every system it must avoid


@dataclass(frozen=True)
class SetError:
    """The set cannot go on (no retry possible, or never placeable); the message says why."""

    set: int
    message: str


Decision = (
    Schedule
    | Assign
    | Enqueue
    | Release
    | CreateVm
    | Start
    | Idle
    | Cancel
    | Abort
    | Stop
    | Retry
    | SetError
)
