"""The queue page: waiting recipe sets in scheduling order, with the reason for each place.

The rows are the scheduler's own (``events.queue_view()``, as ``GET /queue``
reads them): effective and nominal priority, static predictive value and
weight, age, holds, what a set waits for, and when it should start and end
(``events.forecasts()``). The table is also served alone
(``/queue/live``) for the page's live updates.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request, Response

from labq.domain.states import RecipeState
from labq.gateway.deps import AppState, StateDep
from labq.store import reading
from labq.usecases import queries
from labq.usecases.forecasts import forecast_times
from labq.web.rendering import fragment, page
from labq.web.route import PageRoute
from labq.web.session import SessionDep

router = APIRouter(route_class=PageRoute, include_in_schema=False)


Filter = Annotated[str | None, Query(max_length=255)]


@dataclass(frozen=True)
class QueueFilters:
    """The page's filters (empty fields filter nothing), as ``labq queue`` takes them."""

    owner: Filter = None
    group: Filter = None
    lab: Filter = None
    state: Filter = None
    whiteboard: Filter = None
    run: Filter = None

    def given(self) -> dict[str, str]:
        """The filters that are set."""
        return {k: v for k, v in asdict(self).items() if v}


FiltersDep = Annotated[QueueFilters, Depends()]
WAITING_STATES = ["new", "queued", "assigned", "scheduled"]  # what a waiting set can be in


def queue_rows(app: AppState, filters: QueueFilters | None = None) -> list[dict[str, Any]]:
    """The queue as the scheduler sees it now, with owner, whiteboard and run, filtered."""
    view = app.events.queue_view()
    given = (filters or QueueFilters()).given()
    state = given.pop("state", None)
    states = {s.value: s for s in RecipeState}
    if state is not None and state not in states:
        return []
    forecasts = app.events.forecasts()
    with reading(app.engine) as repo:
        rows = queries.queue_rows(
            repo, view, state=states.get(state or ""), forecasts=forecasts, **given
        )
    now = app.clock()
    for row in rows:  # the times in words, as `labq queue` prints them
        forecast = row["forecast"]
        row["forecast_times"] = None if forecast is None else forecast_times(forecast, now)
    return rows


def _context(rows: list[dict[str, Any]], filters: QueueFilters) -> dict[str, Any]:
    given = filters.given()
    return {
        "rows": rows,
        "by_lab": sorted(Counter(r["lab"] or "not placed" for r in rows).items()),
        "holding": sum(1 for r in rows if r["hold"] != "none"),
        "blocked": sum(1 for r in rows if r["waits_for"]),
        "in_all": any(" in all)" in (r["reason"] or "") for r in rows),  # explained under it
        "filters": given,
        "live_query": ("?" + urlencode(given)) if given else "",
        "states": WAITING_STATES,
    }


@router.get("/queue")
def queue_page(
    request: Request, app: StateDep, session: SessionDep, filters: FiltersDep
) -> Response:
    """The whole queue, in order (or the rows the filters keep)."""
    rows = queue_rows(app, filters)
    return page(request, "queue.html", title="Queue", nav="queue", **_context(rows, filters))


@router.get("/queue/live")
def queue_live(app: StateDep, session: SessionDep, filters: FiltersDep) -> Response:
    """The queue's table alone, for the page's live updates."""
    return fragment("queue_live.html", **_context(queue_rows(app, filters), filters))
