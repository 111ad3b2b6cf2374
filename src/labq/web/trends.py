"""The charts page: the lab's numbers over an interval the reader chooses.

Utilisation per pool and per lab, queue length and mean wait, and a Gantt
timeline of every system. The series come from :mod:`labq.web.series` and are
drawn as inline SVG by :mod:`labq.web.charts` (matplotlib, on the server): no
script, no network. Every chart spans the interval chosen, whatever its data.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from markupsafe import Markup

from labq.gateway.deps import StateDep
from labq.store import epoch
from labq.web.charts import gantt_chart, line_chart
from labq.web.intervals import SPANS, chosen_interval
from labq.web.rendering import page
from labq.web.route import PageRoute
from labq.web.series import queue_over_time, system_timeline, utilisation_over_time
from labq.web.session import SessionDep

router = APIRouter(route_class=PageRoute, include_in_schema=False)


@router.get("/charts")
def charts_page(
    request: Request,
    app: StateDep,
    session: SessionDep,
    last: str | None = None,
    start: str | None = None,
    end: str | None = None,
) -> Response:
    """Utilisation, queue length, wait time and the systems' timeline over one interval."""
    now = app.clock()
    interval, problem = chosen_interval(now, last=last, start=start, end=end)
    begin, finish = interval.start, interval.end
    # Open history rows count up to now, not to the end of a bucket still to come.
    by_pool = utilisation_over_time(app.engine, by="pool", start=begin, end=finish, now=now)
    by_lab = utilisation_over_time(app.engine, by="lab", start=begin, end=finish, now=now)
    lengths, waits = queue_over_time(app.engine, start=begin, end=finish)
    timeline = system_timeline(app.engine, start=begin, end=finish)
    window = (epoch(begin), epoch(finish))
    charts = [
        line_chart(
            by_pool, title="Utilisation per pool", y_label="busy share", y_max=1.0, window=window
        ),
        line_chart(
            by_lab, title="Utilisation per lab", y_label="busy share", y_max=1.0, window=window
        ),
        line_chart(lengths, title="Queue length", y_label="waiting sets", window=window),
        line_chart(
            waits,
            title="Mean wait (started and still waiting)",
            y_label="wait",
            window=window,
            durations=True,
        ),
        gantt_chart(timeline, start=window[0], end=window[1], title="Systems over time"),
    ]
    return page(
        request,
        "charts.html",
        title="Charts",
        nav="charts",
        interval=interval,
        spans=list(SPANS),
        error=problem,
        # SVG made by labq.web.charts, which escapes every label it draws.
        charts=[Markup(svg) for svg in charts],  # noqa: S704
    )
