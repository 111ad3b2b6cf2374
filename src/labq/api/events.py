"""Telling the scheduler after a commit: the API posts event objects and never fails for it.

The API never calls the scheduler. After a handler has committed its change it
posts one :mod:`labq.domain.events` event on the app's
:class:`~labq.domain.events.EventSink` (the service queues it for the scheduler
thread, or NOTIFY carries it to the leader). A missed event is repaired by the
scheduler's ``resume`` at start and by the consistency pass.
"""

from __future__ import annotations

import logging

from labq.domain.events import Event, EventSink

log = logging.getLogger("labq.api")


def tell(events: EventSink, event: Event) -> None:
    """Post ``event`` after a commit; a failure is logged, never answered.

    The change is committed: answering 500 would make a client repeat it. The
    scheduler catches up from the database (``resume``, the consistency pass).
    """
    try:
        events.post(event)
    except Exception:
        log.exception("an event could not be delivered to the scheduler")


def as_sink(events: EventSink) -> EventSink:
    """The app's events as a sink: they are one already (kept for callers of the adapter
    that bridged the named-method events)."""
    return events
