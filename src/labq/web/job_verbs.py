"""The job page's Clone button and Extend form: each calls the use case the API calls, so
permissions, checks and the event told to the scheduler are exactly the API's."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import RedirectResponse

from labq.domain.events import JobSubmitted
from labq.gateway.deps import StateDep
from labq.gateway.schemas import INT4_MAX, RowId
from labq.store import reading, transaction
from labq.usecases import clones, extension
from labq.web.events import post
from labq.web.jobs import job_page
from labq.web.rendering import PREFIX
from labq.web.route import PageRoute, refusal
from labq.web.session import FormSessionDep

router = APIRouter(route_class=PageRoute, include_in_schema=False)


@router.post("/jobs/{job_id}/clone")
def clone(request: Request, job_id: RowId, app: StateDep, session: FormSessionDep) -> Response:
    """Submit the job again as the reader's; on to the clone's page."""
    try:
        with reading(app.engine) as repo:
            plan = clones.plan_clone(
                repo, job_id, clones.CloneChanges(), limits=app.settings.limits
            )
        with transaction(app.engine) as repo:
            new_id = clones.clone_job(repo, session.user, plan, now=app.clock())
    except Exception as exc:
        failure = refusal(exc)
        if failure is None:
            raise
        return job_page(request, app, session, job_id, status=failure.status, error=failure.message)
    post(app, [JobSubmitted(new_id)])
    return RedirectResponse(f"{PREFIX}/jobs/{new_id}?note=cloned", status_code=303)


@router.post("/jobs/{job_id}/extend")
def extend(
    request: Request,
    job_id: RowId,
    app: StateDep,
    session: FormSessionDep,
    minutes: Annotated[int, Form(ge=1, le=INT4_MAX // 60)],
) -> Response:
    """Move the max_time of the job's running sets (its owner, its group, admins)."""
    try:
        with transaction(app.engine) as repo:
            extension.extend_job(
                repo,
                session.user,
                job_id,
                minutes * 60,
                ceiling=app.settings.limits.max_extend,
                now=app.clock(),
            )
    except Exception as exc:
        failure = refusal(exc)
        if failure is None:
            raise
        return job_page(request, app, session, job_id, status=failure.status, error=failure.message)
    return RedirectResponse(f"{PREFIX}/jobs/{job_id}?note=extended", status_code=303)
