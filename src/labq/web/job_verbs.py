"""The job page's Clone button and Extend form: each calls the API's own handler, so
permissions, checks and the event told to the scheduler are exactly the API's."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import RedirectResponse

from labq.api import clones as api_clones
from labq.api import extend as api_extend
from labq.gateway.deps import StateDep
from labq.gateway.schemas import INT4_MAX, RowId
from labq.web.jobs import job_page
from labq.web.rendering import PREFIX
from labq.web.route import PageRoute, refusal
from labq.web.session import FormSessionDep

router = APIRouter(route_class=PageRoute, include_in_schema=False)


@router.post("/jobs/{job_id}/clone")
def clone(request: Request, job_id: RowId, app: StateDep, session: FormSessionDep) -> Response:
    """Submit the job again as the reader's; on to the clone's page."""
    try:
        answer = api_clones.clone_job(job_id, app, session.user, None)
    except Exception as exc:
        failure = refusal(exc)
        if failure is None:
            raise
        return job_page(request, app, session, job_id, status=failure.status, error=failure.message)
    return RedirectResponse(f"{PREFIX}/jobs/{answer['id']}?note=cloned", status_code=303)


@router.post("/jobs/{job_id}/extend")
def extend(
    request: Request,
    job_id: RowId,
    app: StateDep,
    session: FormSessionDep,
    minutes: Annotated[int, Form(ge=1, le=INT4_MAX // 60)],
) -> Response:
    """Move the max_time of the job's running sets (its owner, its group, admins)."""
    body = api_extend.ExtendBody(by=minutes * 60)
    try:
        api_extend.extend_job(job_id, body, app, session.user)
    except Exception as exc:
        failure = refusal(exc)
        if failure is None:
            raise
        return job_page(request, app, session, job_id, status=failure.status, error=failure.message)
    return RedirectResponse(f"{PREFIX}/jobs/{job_id}?note=extended", status_code=303)
