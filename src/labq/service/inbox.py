"""What the scheduler thread is told, in order: the API's events and the service's own.

The API's events are :mod:`labq.domain.events`. Here are the service's own, each
defined once (a supervisor's exit, the consistency pass, the timer, and the
barriers and wake-ups of the thread itself), and :class:`Inbox`, the queue they
all wait in: made before the service, so that the dispatcher's exit callback
posts straight into it. A run of submissions queued one after another comes out
as one :class:`Submissions`, handled in one transaction.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from typing import ClassVar, Final

from labq.domain.events import Event, JobSubmitted, name_of

MAX_SUBMITS: Final = 1000  # queued submissions taken together in one event


@dataclass(frozen=True)
class SupervisorExited:
    """The dispatcher saw the supervisor carrying ``claim`` exit, with everything it ran
    (``code`` None: it was already gone)."""

    name: ClassVar[str] = "finished"
    set_id: int
    code: int | None
    claim: str


@dataclass(frozen=True)
class ConsistencyDue:
    """Time for the consistency pass (its timer, or a listener that reconnected)."""

    name: ClassVar[str] = "consistency"


@dataclass(frozen=True)
class TimerDue:
    """The first pause or reservation ran out (the service's timer)."""

    name: ClassVar[str] = "pauses"


@dataclass(frozen=True)
class Submissions:
    """Jobs submitted one after another, taken together (never posted: :meth:`Inbox.take`
    makes it of :class:`~labq.domain.events.JobSubmitted` events)."""

    name: ClassVar[str] = "submit"
    jobs: tuple[int, ...]


@dataclass(frozen=True)
class Barrier:
    """Set ``done`` once every event queued before it is handled (tests, shutdown)."""

    done: threading.Event


@dataclass(frozen=True)
class Stopping:
    """Wakes the thread to see that it is stopping."""


# the service's own events that others post: the dispatcher, a listener, tests
ServiceEvent = SupervisorExited | ConsistencyDue
Handled = Event | ServiceEvent | TimerDue | Submissions  # what the handlers' table covers
Posted = Event | ServiceEvent | Barrier | Stopping  # what waits in the inbox


def label_of(event: Handled) -> str:
    """The event's short name, for logs and metrics (the wire name of an API event)."""
    if isinstance(event, SupervisorExited | ConsistencyDue | TimerDue | Submissions):
        return event.name
    return name_of(event)


class Inbox:
    """The scheduler thread's queue: posted from any thread, taken by the scheduler's."""

    def __init__(self) -> None:
        self._queue: queue.Queue[Posted] = queue.Queue()
        self._held: Posted | None = None  # taken from the queue while gathering submissions

    def post(self, event: Posted) -> None:
        """Queue ``event``."""
        self._queue.put(event)

    def supervisor_exited(self, set_id: int, code: int | None, claim: str) -> None:
        """The dispatcher's ``on_finished``: queue the supervisor's exit."""
        self._queue.put(SupervisorExited(set_id, code, claim))

    def take(self, wait: float) -> Posted | Submissions:
        """The next event (:class:`queue.Empty` after ``wait`` seconds of none); submissions
        queued one after another come as one :class:`Submissions`."""
        if self._held is not None:
            event, self._held = self._held, None
        else:
            event = self._queue.get(timeout=wait)
        if not isinstance(event, JobSubmitted):
            return event
        jobs = [event.job_id]
        while len(jobs) < MAX_SUBMITS:
            try:
                later = self._queue.get_nowait()
            except queue.Empty:
                break
            if not isinstance(later, JobSubmitted):
                self._held = later
                break
            jobs.append(later.job_id)
        return Submissions(tuple(jobs))
