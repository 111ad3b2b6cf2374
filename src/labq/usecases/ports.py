"""The seams between the adapters and the scheduler: where events go, the queue it sees,
and the bell that wakes lab agents' waiting claims.

The API and the web UI hold these; the server wires the scheduler service (or a
NOTIFY to the leader) behind them, so no adapter imports ``labq.service``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Protocol

from labq.domain.events import Event, EventSink
from labq.domain.queue import QueueRow, SetForecast


class QueueSource(Protocol):
    """Where the queue as the scheduler sees it comes from."""

    def queue_view(self) -> list[QueueRow]:
        """The queue in scheduling order, as the scheduler sees it now."""

    def forecasts(self) -> Mapping[int, SetForecast]:
        """Each waiting and running set's forecast start and end, by set id (empty: the
        scheduler forecasts nothing here)."""


class SchedulerPort(EventSink, QueueSource, Protocol):
    """What the adapters hold of the scheduler: a sink for events, the queue it sees and
    the forecasts it makes."""


class NoScheduler:
    """No scheduler behind the adapters (tests, a read-only replica): events go nowhere,
    the queue is empty and nothing is forecast."""

    def post(self, event: Event) -> None:
        """Nothing to tell."""

    def queue_view(self) -> list[QueueRow]:
        """No scheduler, no queue."""
        return []

    def forecasts(self) -> Mapping[int, SetForecast]:
        """No scheduler, no forecasts."""
        return {}


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
