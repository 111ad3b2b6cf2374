"""NOTIFY carries an event's encoding; the leader's listener decodes it into the same event."""

from __future__ import annotations

import queue
from collections.abc import Iterator

import pytest
from sqlalchemy import URL, text

from labq.domain.events import AccessChanged, Event, JobSubmitted, ReservationChanged
from labq.service.inbox import ConsistencyDue
from labq.service.notify import CHANNEL, EventRouter, Listener
from labq.store import make_engine
from tests.conftest import pg_copy

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_url(pg_server) -> Iterator[URL]:
    with pg_copy(pg_server) as url:
        yield url


def test_an_event_posted_on_a_standby_reaches_the_listener_as_that_event(pg_url: URL) -> None:
    url = pg_url.render_as_string(hide_password=False)
    heard: queue.Queue[Event | ConsistencyDue] = queue.Queue()
    listener = Listener(url, heard.put)
    listener.start()
    engine = make_engine(url)
    try:
        router = EventRouter(engine, list)
        assert router.role() == "standby"
        with engine.begin() as conn:  # another version's event: ignored, the next one comes
            conn.execute(text("SELECT pg_notify(:c, 'wake:')"), {"c": CHANNEL})
        for event in (JobSubmitted(7), AccessChanged(), ReservationChanged("a.lab1")):
            router.post(event)
            assert heard.get(timeout=10) == event
    finally:
        listener.stop()
        engine.dispose()
