"""The seam between the API and the scheduler: what the API tells it, and what it asks.

The API never calls the scheduler. After a handler has committed its change it
calls one of these methods; the service queues the event for the scheduler
thread. A missed event is repaired by the scheduler's ``resume`` at start and by
the consistency pass, so these methods must be quick and must not touch the
request's (already committed) transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from labq.domain.events import (
    AccessChanged,
    ConditionChanged,
    Event,
    EventSink,
    FiltersChanged,
    JobsCancelled,
    JobSubmitted,
    LocksChanged,
    PauseChanged,
    PriorityChanged,
    ReservationChanged,
    SetEnded,
    SystemAdded,
)

log = logging.getLogger("labq.api")


@dataclass(frozen=True)
class QueueRow:
    """One queued recipe set in scheduling order, with the reason for its place."""

    set_id: int
    job_id: int
    position: int
    effective: str | None  # the effective priority's label; None: no pool open to it
    nominal: str
    age_s: float
    hold: str  # "none", or how it holds systems ("holding 2 of 3 in lab1", …)
    lab: str | None
    spv: float = 1.0  # static predictive value (seed 004)
    weight: float = 0.0  # spv after aging; lower goes first among equal priorities
    age_ticks: int = 0  # age in queue ticks (``queue.tick`` seconds each)
    waits_for: str | None = None  # what makes it ineligible now (a dependency, a filter, …)
    reason: str = ""  # what it waits for in plain words, never empty (waits_for, or systems)
    state: str = "queued"  # its least advanced recipe's state
    labs: tuple[str, ...] = ()  # where systems matching its recipes are (not yet placed)


class Events(Protocol):
    """What the service implements for the API (see ``docs/api.md``)."""

    def job_submitted(self, job_id: int) -> None:
        """A job was stored; its recipes are ``new``."""

    def jobs_cancelled(self, job_id: int) -> None:
        """A job's unfinished recipes were cancelled."""

    def priority_changed(self, job_id: int) -> None:
        """The nominal priority of a job's waiting sets changed."""

    def system_added(self, fqdn: str) -> None:
        """A system was added."""

    def condition_changed(self, fqdn: str) -> None:
        """A system's condition changed (and its usage with it)."""

    def access_changed(self) -> None:
        """Pools, pool membership, access rules or a system's inventory changed."""

    def locks_changed(self, set_id: int) -> None:
        """A running set took or let go of locks (its spv weight on others changes)."""

    def filters_changed(self) -> None:
        """A filter rule was added or removed."""

    def pause_changed(self, lab: str) -> None:
        """A lab's queue was paused or resumed."""

    def reservation_changed(self, fqdn: str) -> None:
        """A system was reserved, loaned or released (issue 14)."""

    def set_ended(self, set_id: int) -> None:
        """A lab agent's supervisor of a started set exited and every report got through."""

    def queue_view(self) -> list[QueueRow]:
        """The queue in scheduling order, as the scheduler sees it now."""


class NoEvents:
    """Events that go nowhere: an API without a scheduler (tests, a read-only replica)."""

    def job_submitted(self, job_id: int) -> None:
        """Nothing to tell."""

    def jobs_cancelled(self, job_id: int) -> None:
        """Nothing to tell."""

    def priority_changed(self, job_id: int) -> None:
        """Nothing to tell."""

    def system_added(self, fqdn: str) -> None:
        """Nothing to tell."""

    def condition_changed(self, fqdn: str) -> None:
        """Nothing to tell."""

    def access_changed(self) -> None:
        """Nothing to tell."""

    def locks_changed(self, set_id: int) -> None:
        """Nothing to tell."""

    def filters_changed(self) -> None:
        """Nothing to tell."""

    def pause_changed(self, lab: str) -> None:
        """Nothing to tell."""

    def reservation_changed(self, fqdn: str) -> None:
        """Nothing to tell."""

    def set_ended(self, set_id: int) -> None:
        """Nothing to tell."""

    def queue_view(self) -> list[QueueRow]:
        """No scheduler, no queue."""
        return []


def tell(event: Callable[[], None]) -> None:
    """Call one event method after a commit; a failure is logged, never answered.

    The change is committed: answering 500 would make a client repeat it. The
    scheduler catches up from the database (``resume``, the consistency pass).
    """
    try:
        event()
    except Exception:
        log.exception("an event could not be delivered to the scheduler")


class WorkBell:
    """Rings when the scheduler starts sets for lab agents: wakes long-polling claims at once.

    A claim listens *before* it looks for work, so a ring between its look and
    its wait is not lost. A ring names the lab whose set started, and wakes only
    the claims of agents serving it: with many agents waiting, waking them all
    for every start made each of them look for work it could not have.
    Rung from any thread; waited on in the API's event loop.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[
            tuple[asyncio.AbstractEventLoop, asyncio.Event], frozenset[str] | None
        ] = {}

    def ring(self, lab: str | None = None) -> None:
        """Wake the waiting claims for ``lab`` (None: every waiting claim)."""
        with self._lock:
            waiters = [
                w for w, labs in self._waiters.items() if lab is None or labs is None or lab in labs
            ]
        for loop, event in waiters:
            with contextlib.suppress(RuntimeError):  # its loop has closed
                loop.call_soon_threadsafe(event.set)

    @contextmanager
    def listening(self, labs: Iterable[str] | None = None) -> Iterator[asyncio.Event]:
        """An event set by the next ring for one of ``labs`` (None: any ring); use it
        inside the event loop."""
        waiter = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._waiters[waiter] = None if labs is None else frozenset(labs)
        try:
            yield waiter[1]
        finally:
            with self._lock:
                self._waiters.pop(waiter, None)


def as_sink(events: Events) -> EventSink:
    """The old named-method events as an :class:`EventSink` (until the service posts
    event objects itself)."""
    return _Sink(events)


@dataclass(frozen=True)
class _Sink:
    events: Events

    def post(self, event: Event) -> None:
        e = self.events
        match event:
            case JobSubmitted(job_id):
                e.job_submitted(job_id)
            case JobsCancelled(job_id):
                e.jobs_cancelled(job_id)
            case PriorityChanged(job_id):
                e.priority_changed(job_id)
            case SystemAdded(fqdn):
                e.system_added(fqdn)
            case ConditionChanged(fqdn):
                e.condition_changed(fqdn)
            case AccessChanged():
                e.access_changed()
            case LocksChanged(set_id):
                e.locks_changed(set_id)
            case FiltersChanged():
                e.filters_changed()
            case PauseChanged(lab):
                e.pause_changed(lab)
            case ReservationChanged(fqdn):
                e.reservation_changed(fqdn)
            case SetEnded(set_id):
                e.set_ended(set_id)
