"""The queue page: waiting recipe sets in scheduling order, with the reason for each place.

The rows are the scheduler's own (``events.queue_view()``, as ``GET /queue``
reads them): effective and nominal priority, static predictive value and
weight, age, holds, and what a set waits for. The table is also served alone
(``/queue/live``) for the page's live updates.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from fastapi import APIRouter, Request, Response

from labq.api.deps import AppState, StateDep
from labq.api.events import QueueRow
from labq.web.rendering import fragment, page
from labq.web.route import PageRoute
from labq.web.session import SessionDep

router = APIRouter(route_class=PageRoute, include_in_schema=False)


def queue_rows(app: AppState) -> list[QueueRow]:
    """The queue as the scheduler sees it now."""
    return list(app.events.queue_view())


def _context(rows: list[QueueRow]) -> dict[str, Any]:
    return {
        "rows": rows,
        "by_lab": sorted(Counter(r.lab or "any lab" for r in rows).items()),
        "holding": sum(1 for r in rows if r.hold != "none"),
        "blocked": sum(1 for r in rows if r.waits_for),
    }


@router.get("/queue")
def queue_page(request: Request, app: StateDep, session: SessionDep) -> Response:
    """The whole queue, in order."""
    return page(request, "queue.html", title="Queue", nav="queue", **_context(queue_rows(app)))


@router.get("/queue/live")
def queue_live(app: StateDep, session: SessionDep) -> Response:
    """The queue's table alone, for the page's live updates."""
    return fragment("queue_live.html", **_context(queue_rows(app)))
