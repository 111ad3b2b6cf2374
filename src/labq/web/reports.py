"""UI pages for issue 14's log and system verbs: a job's JUnit report, a followed log, and
the systems summary (``sinfo``) — each the API's answer, from the same use cases."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import Field

from labq.domain.summary import COLUMNS, summarise
from labq.gateway.deps import StateDep
from labq.gateway.schemas import INTEGRAL, RowId
from labq.store import reading
from labq.usecases import logtail
from labq.usecases.junit import junit_xml
from labq.usecases.logs import log_reader
from labq.web.rendering import page
from labq.web.route import PageRoute
from labq.web.session import SessionDep

router = APIRouter(route_class=PageRoute, include_in_schema=False)


@router.get("/jobs/{job_id}/junit")
def job_junit(job_id: RowId, app: StateDep, session: SessionDep) -> Response:
    """The job's results as a JUnit XML download."""
    with reading(app.engine) as repo:
        job = repo.jobs.load_job(job_id)
    document = junit_xml(job, log_reader(app.settings.data_path()))
    headers = {"Content-Disposition": f'attachment; filename="job-{job_id}-junit.xml"'}
    return Response(document, media_type="application/xml", headers=headers)


@router.get("/jobs/{job_id}/logs/follow")
async def job_log_follow(
    job_id: RowId,
    request: Request,
    app: StateDep,
    session: SessionDep,
    name: Annotated[str | None, Query(min_length=1, max_length=4096)] = None,
    offset: Annotated[int, Field(ge=0, le=2**62), INTEGRAL] = 0,
) -> StreamingResponse:
    """A task's log as it is written (a browser shows the text as it comes)."""
    tail = await logtail.tail_log(
        app.engine,
        app.settings.data_path(),
        job_id,
        name,
        offset,
        follow=True,
        disconnected=request.is_disconnected,
    )
    headers = {**tail.headers(), "X-Content-Type-Options": "nosniff"}
    return StreamingResponse(tail.body, media_type="text/plain; charset=utf-8", headers=headers)


@router.get("/systems-summary")
def systems_summary(request: Request, app: StateDep, session: SessionDep) -> Response:
    """Per lab and pool, systems by state (``labq system summary``)."""
    with reading(app.engine) as repo:
        labs = summarise(
            repo.systems.list_systems(), frozenset(repo.reservations.open_reservations())
        )
    return page(
        request,
        "systems_summary.html",
        title="Systems summary",
        nav="systems",
        labs=labs,
        columns=["total", *COLUMNS],
    )
