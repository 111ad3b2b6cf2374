"""Scheduler events across processes: ``NOTIFY labq_events`` out, ``LISTEN`` in.

On PostgreSQL several ``labq server`` processes share one database and only the
leader schedules (:mod:`labq.service.leader`). The API of any of them commits a
change, then tells the scheduler through :class:`EventRouter`: the local
scheduler directly when this process leads, otherwise a ``NOTIFY`` that the
leader's :class:`Listener` receives and queues. A notification can be lost (no
leader at that moment, a dropped connection): the new leader's rebuild and the
consistency pass catch up from the database, and every event is idempotent, so
one delivered twice is harmless.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Final

from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from labq.domain.events import Event, decode, encode
from labq.domain.queue import QueueRow, SetForecast
from labq.service.inbox import ConsistencyDue
from labq.service.loop import SchedulerService

CHANNEL: Final = "labq_events"
RECONNECT_EVERY: Final = 2.0
_POLL: Final = 1.0

log = logging.getLogger("labq.notify")

Deliver = Callable[[Event | ConsistencyDue], None]


def conninfo(url: str) -> str:
    """A libpq connection string for a SQLAlchemy PostgreSQL URL."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class EventRouter:
    """The API's :class:`~labq.usecases.ports.SchedulerPort`: the local scheduler or a NOTIFY.

    ``service`` is set while this process leads; ``engine`` is None on SQLite,
    where the one process always leads.
    """

    def __init__(
        self,
        engine: Engine | None,
        standby_view: Callable[[], list[QueueRow]],
        standby_forecasts: Callable[[], Mapping[int, SetForecast]] = dict,
    ):
        self.engine = engine
        self.service: SchedulerService | None = None
        self._standby_view = standby_view
        self._standby_forecasts = standby_forecasts

    def role(self) -> str:
        """``leader`` when this process schedules, ``standby`` otherwise."""
        return "leader" if self.service is not None else "standby"

    def deliver(self, event: Event | ConsistencyDue) -> None:
        """An event from another process (or this one): queued when this process leads."""
        service = self.service
        if service is not None:
            service.post(event)

    def post(self, event: Event) -> None:
        """An event from this process's API: to the local scheduler, or NOTIFY the leader."""
        service = self.service
        if service is not None:
            service.post(event)
        elif self.engine is not None:
            with self.engine.begin() as conn:
                conn.execute(
                    text("SELECT pg_notify(:channel, :payload)"),
                    {"channel": CHANNEL, "payload": encode(event)},
                )

    def queue_view(self) -> list[QueueRow]:
        """The leader's view here; a standby builds one from the database."""
        service = self.service
        return service.queue_view() if service is not None else self._standby_view()

    def forecasts(self) -> Mapping[int, SetForecast]:
        """The leader's forecasts here; a standby makes them on a core it rebuilds from the
        database, history included (as its queue view does): the same, but for what the
        leader learnt since its last commit."""
        service = self.service
        return service.forecasts() if service is not None else self._standby_forecasts()


class Listener:
    """A thread that ``LISTEN``s on its own connection and hands each event to ``deliver``.

    After a reconnect it delivers :class:`~labq.service.inbox.ConsistencyDue`:
    notifications sent while it was away are gone, and the pass (with its catch-up)
    repairs that.
    """

    def __init__(self, url: str, deliver: Deliver, *, reconnect_every: float = RECONNECT_EVERY):
        self.conninfo = conninfo(url)
        self.deliver = deliver
        self.reconnect_every = reconnect_every
        self._stopping = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 10.0) -> None:
        """Start listening; returns once ``LISTEN`` is in place (or after ``timeout``)."""
        self._thread = threading.Thread(target=self._run, name="labq-listen", daemon=True)
        self._thread.start()
        self._ready.wait(timeout)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop listening."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        import psycopg  # here: a server on SQLite listens to no PostgreSQL channel

        first = True
        while not self._stopping.is_set():
            try:
                with psycopg.connect(self.conninfo, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self._ready.set()
                    if not first:
                        self.deliver(ConsistencyDue())
                    first = False
                    while not self._stopping.is_set():
                        for note in conn.notifies(timeout=_POLL):
                            self._handle(note.payload)
            except psycopg.Error as exc:
                log.warning("listening for events failed (%s); reconnecting", exc)
            self._stopping.wait(self.reconnect_every)

    def _handle(self, payload: str) -> None:
        event = decode(payload)
        if event is None:
            log.warning("ignoring an unknown event %r", payload)
            return
        try:
            self.deliver(event)
        except Exception:
            log.exception("could not deliver event %r", payload)
