"""Posting what the scheduler must hear, once the change is committed."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from labq.domain.events import Event, EventSink

log = logging.getLogger("labq.usecases")


def post_all(sink: EventSink, events: Iterable[Event]) -> None:
    """Post each event in turn; a failure is logged, never raised.

    The change is committed: failing the request would make a client repeat it. The
    scheduler catches up from the database (``resume``, the consistency pass).
    """
    for event in events:
        try:
            sink.post(event)
        except Exception:
            log.exception("an event could not be delivered to the scheduler")
