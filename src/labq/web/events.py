"""What the pages tell the scheduler: the events a use case returned, posted once its
transaction has committed (as the API posts them)."""

from __future__ import annotations

from collections.abc import Iterable

from labq.domain.events import Event
from labq.gateway.deps import AppState
from labq.usecases.posting import post_all


def post(app: AppState, events: Iterable[Event]) -> None:
    """Post ``events`` to the app's scheduler; a failure is logged, never shown."""
    post_all(app.events, events)
