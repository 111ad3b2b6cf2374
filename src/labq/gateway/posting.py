"""A write transaction whose scheduler events are posted once it has committed.

A use case posts its events on the :class:`Outbox` it is given, inside the
transaction; :func:`committing` hands them to the scheduler only after the commit,
as the API always has: a refused or rolled-back change tells the scheduler nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from labq.domain.events import Event
from labq.gateway.deps import AppState
from labq.gateway.events import Events, as_sink, tell
from labq.store import Repository, transaction


class Outbox:
    """An :class:`~labq.domain.events.EventSink` that keeps events until the commit."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def post(self, event: Event) -> None:
        """Keep ``event`` for after the commit."""
        self.events.append(event)


def post_after_commit(events: Events, posted: Iterable[Event]) -> None:
    """Post each event in turn; a failure is logged, never answered (see :func:`tell`)."""
    sink = as_sink(events)
    for event in posted:
        tell(functools.partial(sink.post, event))


@contextmanager
def committing(state: AppState) -> Iterator[tuple[Repository, Outbox]]:
    """A repository on one transaction and the outbox for its events, posted after the
    commit (and dropped when the transaction raises)."""
    outbox = Outbox()
    with transaction(state.engine) as repo:
        yield repo, outbox
    post_after_commit(state.events, outbox.events)
