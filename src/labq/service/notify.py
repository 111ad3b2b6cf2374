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
from collections.abc import Callable
from typing import Final

import psycopg
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from labq.gateway.events import QueueRow
from labq.service.loop import JOB_EVENTS, KINDS, SET_EVENTS, SchedulerService

CHANNEL: Final = "labq_events"
RECONNECT_EVERY: Final = 2.0
_POLL: Final = 1.0

log = logging.getLogger("labq.notify")

Deliver = Callable[[str, int | str | None], None]


def encode(kind: str, key: int | str | None) -> str:
    """The payload of one event: ``<kind>:<key>`` (an empty key for ``access``)."""
    return f"{kind}:{'' if key is None else key}"


def decode(payload: str) -> tuple[str, int | str | None] | None:
    """``(kind, key)`` from a payload; None for one this version does not know."""
    kind, sep, raw = payload.partition(":")
    if not sep or kind not in KINDS:
        return None
    if kind in JOB_EVENTS | SET_EVENTS:
        return (kind, int(raw)) if raw.isdigit() else None
    return kind, raw or None


def conninfo(url: str) -> str:
    """A libpq connection string for a SQLAlchemy PostgreSQL URL."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class EventRouter:
    """The API's :class:`~labq.gateway.events.Events`: the local scheduler or a NOTIFY.

    ``service`` is set while this process leads; ``engine`` is None on SQLite,
    where the one process always leads.
    """

    def __init__(self, engine: Engine | None, standby_view: Callable[[], list[QueueRow]]):
        self.engine = engine
        self.service: SchedulerService | None = None
        self._standby_view = standby_view

    def role(self) -> str:
        """``leader`` when this process schedules, ``standby`` otherwise."""
        return "leader" if self.service is not None else "standby"

    def deliver(self, kind: str, key: int | str | None) -> None:
        """An event from another process (or this one): queued when this process leads."""
        service = self.service
        if service is not None:
            service.post(kind, key)

    def _send(self, kind: str, key: int | str | None) -> None:
        service = self.service
        if service is not None:
            service.post(kind, key)
        elif self.engine is not None:
            with self.engine.begin() as conn:
                conn.execute(
                    text("SELECT pg_notify(:channel, :payload)"),
                    {"channel": CHANNEL, "payload": encode(kind, key)},
                )

    def job_submitted(self, job_id: int) -> None:
        """A job was stored."""
        self._send("submit", job_id)

    def jobs_cancelled(self, job_id: int) -> None:
        """A job was cancelled."""
        self._send("cancel", job_id)

    def priority_changed(self, job_id: int) -> None:
        """A job's priority changed."""
        self._send("priority", job_id)

    def system_added(self, fqdn: str) -> None:
        """A system was added."""
        self._send("system", fqdn)

    def condition_changed(self, fqdn: str) -> None:
        """A system's condition changed."""
        self._send("condition", fqdn)

    def access_changed(self) -> None:
        """Pools or rules changed."""
        self._send("access", None)

    def locks_changed(self, set_id: int) -> None:
        """A running set took or let go of locks."""
        self._send("locks", set_id)

    def filters_changed(self) -> None:
        """A filter rule was added or removed."""
        self._send("filters", None)

    def pause_changed(self, lab: str) -> None:
        """A lab's queue was paused or resumed."""
        self._send("pause", lab)

    def reservation_changed(self, fqdn: str) -> None:
        """A system was reserved, loaned or released."""
        self._send("reservation", fqdn)

    def set_ended(self, set_id: int) -> None:
        """An agent's supervisor of a set exited."""
        self._send("ended", set_id)

    def queue_view(self) -> list[QueueRow]:
        """The leader's view here; a standby builds one from the database."""
        service = self.service
        return service.queue_view() if service is not None else self._standby_view()


class Listener:
    """A thread that ``LISTEN``s on its own connection and hands each event to ``deliver``.

    After a reconnect it delivers a ``consistency`` event: notifications sent
    while it was away are gone, and the pass (with its catch-up) repairs that.
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
        first = True
        while not self._stopping.is_set():
            try:
                with psycopg.connect(self.conninfo, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self._ready.set()
                    if not first:
                        self.deliver("consistency", None)
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
            self.deliver(*event)
        except Exception:
            log.exception("could not deliver event %r", payload)
