"""A write transaction whose scheduler events are posted once it has committed.

A use case posts its events on the :class:`Outbox` it is given, inside the
transaction; :func:`committing` hands them to the scheduler only after the commit,
as the API always has: a refused or rolled-back change tells the scheduler nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from labq.domain.events import Event
from labq.gateway.deps import AppState
from labq.store import Repository, transaction
from labq.usecases.posting import post_all


class Outbox:
    """An :class:`~labq.domain.events.EventSink` that keeps events until the commit."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def post(self, event: Event) -> None:
        """Keep ``event`` for after the commit."""
        self.events.append(event)


@contextmanager
def committing(state: AppState) -> Iterator[tuple[Repository, Outbox]]:
    """A repository on one transaction and the outbox for its events, posted after the
    commit (and dropped when the transaction raises)."""
    outbox = Outbox()
    with transaction(state.engine) as repo:
        yield repo, outbox
    post_all(state.events, outbox.events)
