"""What the scheduler is told: one frozen dataclass per event, each defined here once.

A use case commits its change and then posts one of these to an :class:`EventSink`
(the scheduler service in this process, or NOTIFY to the leader in another). A
missed event is repaired by the scheduler's ``resume`` at start and by the
consistency pass, so posting must be quick and must never fail the caller.

On the wire (PostgreSQL NOTIFY) an event is ``<name>:<key>``; :func:`encode` and
:func:`decode` are the one place that spelling lives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol


@dataclass(frozen=True)
class JobSubmitted:
    """A job was stored; its recipes are ``new``."""

    job_id: int


@dataclass(frozen=True)
class JobsCancelled:
    """A job's unfinished recipes were cancelled."""

    job_id: int


@dataclass(frozen=True)
class PriorityChanged:
    """The nominal priority of a job's waiting sets changed."""

    job_id: int


@dataclass(frozen=True)
class SystemAdded:
    """A system was added."""

    fqdn: str


@dataclass(frozen=True)
class ConditionChanged:
    """A system's condition changed (and its usage with it)."""

    fqdn: str


@dataclass(frozen=True)
class AccessChanged:
    """Pools, pool membership, access rules or a system's inventory changed."""


@dataclass(frozen=True)
class LocksChanged:
    """A running set took or let go of locks (its spv weight on others changes)."""

    set_id: int


@dataclass(frozen=True)
class FiltersChanged:
    """A filter rule was added or removed."""


@dataclass(frozen=True)
class PauseChanged:
    """A lab's queue was paused or resumed."""

    lab: str


@dataclass(frozen=True)
class ReservationChanged:
    """A system was reserved, loaned or released."""

    fqdn: str


@dataclass(frozen=True)
class SetEnded:
    """A lab agent's supervisor of a started set exited and every report got through."""

    set_id: int


@dataclass(frozen=True)
class DistrosChanged:
    """A lab's distro catalogue changed: a tree was imported, added or removed."""

    lab: str


Event = (
    JobSubmitted
    | JobsCancelled
    | PriorityChanged
    | SystemAdded
    | ConditionChanged
    | AccessChanged
    | LocksChanged
    | FiltersChanged
    | PauseChanged
    | ReservationChanged
    | SetEnded
    | DistrosChanged
)


class EventSink(Protocol):
    """Where use cases post events after their commit."""

    def post(self, event: Event) -> None:
        """Queue ``event`` for the scheduler; quick, and never raises for a lost one."""


# the wire names, kept from the string events NOTIFY carried before (mixed versions agree)
_NAMES: Final[dict[type[Event], str]] = {
    JobSubmitted: "submit",
    JobsCancelled: "cancel",
    PriorityChanged: "priority",
    SystemAdded: "system",
    ConditionChanged: "condition",
    AccessChanged: "access",
    LocksChanged: "locks",
    FiltersChanged: "filters",
    PauseChanged: "pause",
    ReservationChanged: "reservation",
    SetEnded: "ended",
    DistrosChanged: "distros",
}


def _by_id(kind: Callable[[int], Event]) -> Callable[[str], Event | None]:
    return lambda raw: kind(int(raw)) if raw.isdigit() else None


def _by_name(kind: Callable[[str], Event]) -> Callable[[str], Event | None]:
    return lambda raw: kind(raw) if raw else None


def _keyless(kind: Callable[[], Event]) -> Callable[[str], Event | None]:
    return lambda raw: kind()


_READERS: Final[dict[str, Callable[[str], Event | None]]] = {
    "submit": _by_id(JobSubmitted),
    "cancel": _by_id(JobsCancelled),
    "priority": _by_id(PriorityChanged),
    "system": _by_name(SystemAdded),
    "condition": _by_name(ConditionChanged),
    "access": _keyless(AccessChanged),
    "locks": _by_id(LocksChanged),
    "filters": _keyless(FiltersChanged),
    "pause": _by_name(PauseChanged),
    "reservation": _by_name(ReservationChanged),
    "ended": _by_id(SetEnded),
    "distros": _by_name(DistrosChanged),
}


def name_of(event: Event) -> str:
    """The event's short name (its wire name; metrics label events by it)."""
    return _NAMES[type(event)]


def encode(event: Event) -> str:
    """The NOTIFY payload of ``event``: ``<name>:<key>`` (an empty key for keyless events)."""
    values = list(vars(event).values())
    return f"{_NAMES[type(event)]}:{values[0] if values else ''}"


def decode(payload: str) -> Event | None:
    """The event a payload carries; None for one this version does not know."""
    name, sep, raw = payload.partition(":")
    reader = _READERS.get(name)
    return reader(raw) if sep and reader is not None else None
