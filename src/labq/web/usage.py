"""The usage page: accounting per user, group, pool or lab over an interval (the table of
``GET /usage``), and system-hours per row over time."""

from __future__ import annotations

from collections import defaultdict
from typing import Final

from fastapi import APIRouter, Request, Response
from markupsafe import Markup

from labq.domain.accounting import BY_KEYS, Busy, By, Served, keys_of, report
from labq.gateway.answers import usage_row_json
from labq.gateway.deps import StateDep
from labq.store import epoch, reading
from labq.web.charts import Series, line_chart
from labq.web.intervals import SPANS, chosen_interval
from labq.web.rendering import page
from labq.web.route import PageRoute
from labq.web.session import SessionDep

router = APIRouter(route_class=PageRoute, include_in_schema=False)
BUCKETS: Final = 24


def hours_over_time(
    by: By,
    served: dict[int, Served],
    busy: list[Busy],
    pools: dict[str, frozenset[str]],
    start: float,
    end: float,
) -> list[Series]:
    """System-hours per row in each of :data:`BUCKETS` equal parts of ``[start, end)``."""
    width = (end - start) / BUCKETS
    per: dict[str, list[float]] = defaultdict(lambda: [0.0] * BUCKETS)
    for stretch in busy:
        if stretch.recipe not in served:
            continue
        keys = keys_of(by, served[stretch.recipe], pools)
        first = max(0, int((stretch.start - start) // width))
        last = min(BUCKETS - 1, int((stretch.end - start) // width))
        for index in range(first, last + 1):
            b0, b1 = start + index * width, start + (index + 1) * width
            overlap = max(0.0, min(b1, stretch.end) - max(b0, stretch.start)) / 3600
            for key in keys:
                per[key][index] += overlap
    return [
        Series(key, tuple((start + (i + 0.5) * width, v) for i, v in enumerate(values)))
        for key, values in sorted(per.items())
    ]


@router.get("/usage")
def usage_page(
    request: Request,
    app: StateDep,
    session: SessionDep,
    by: str = "group",
    last: str | None = None,
    start: str | None = None,
    end: str | None = None,
) -> Response:
    """Who used what over one interval: the table and a chart per row over time."""
    chosen: By = by if by in BY_KEYS else "group"  # type: ignore[assignment]
    interval, problem = chosen_interval(app.clock(), last=last or "30d", start=start, end=end)
    with reading(app.engine) as repo:
        found = repo.accounting.accounting_records(interval.start, interval.end)
    rows = report(chosen, found.served, found.busy, found.ended, found.started, found.pools)
    series = hours_over_time(
        chosen, found.served, found.busy, found.pools, epoch(interval.start), epoch(interval.end)
    )
    chart = line_chart(
        series,
        title=f"System-hours per {chosen}",
        y_label="system-hours",
        window=(epoch(interval.start), epoch(interval.end)),
    )
    return page(
        request,
        "usage.html",
        title="Usage",
        nav="usage",
        by=chosen,
        choices=BY_KEYS,
        interval=interval,
        spans=list(SPANS),
        error=problem,
        rows=[usage_row_json(r) for r in rows],
        # SVG made by labq.web.charts, which escapes every label it draws.
        chart=Markup(chart),  # noqa: S704
    )
