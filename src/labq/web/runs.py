"""The runs pages, like Pulpito's: every run with its counts, and one run with its jobs.

Cancelling a run calls the use case the API calls, so permissions and the events
told to the scheduler are exactly the API's.
"""

from __future__ import annotations

from typing import Annotated, Final

from fastapi import APIRouter, Form, Query, Request, Response
from fastapi.responses import RedirectResponse

from labq.domain.runs import STATUSES, job_status
from labq.gateway.deps import AppState, StateDep
from labq.store import reading, transaction
from labq.usecases.cancellation import cancel_run as cancel_the_run
from labq.usecases.permissions import may_change_job
from labq.web.events import post
from labq.web.job_actions import REASON_LIMIT, CancelForm
from labq.web.rendering import PREFIX, page
from labq.web.route import PageRoute, form_body, refusal
from labq.web.session import FormSessionDep, Session, SessionDep

router = APIRouter(route_class=PageRoute, include_in_schema=False)

PAGE_SIZE: Final = 25
NOTES: Final = {
    "cancelled": "The run's unfinished jobs were cancelled.",
    "nothing-to-cancel": "Nothing was left to cancel: every job of the run had finished.",
}


@router.get("/runs")
def runs_list(
    request: Request,
    app: StateDep,
    session: SessionDep,
    page_no: Annotated[int, Query(alias="page", ge=1, le=100_000)] = 1,
) -> Response:
    """A page of runs, newest first, each with queued/running/pass/fail/dead counts."""
    with reading(app.engine) as repo:
        total = repo.runs.count_runs()
        runs = repo.runs.list_runs(limit=PAGE_SIZE, offset=(page_no - 1) * PAGE_SIZE)
    return page(
        request,
        "runs.html",
        title="Runs",
        nav="runs",
        runs=runs,
        total=total,
        statuses=STATUSES,
        page_no=page_no,
        pages=max(1, -(-total // PAGE_SIZE)),
    )


def run_page(
    request: Request,
    app: AppState,
    session: Session,
    name: str,
    *,
    status: int = 200,
    error: str | None = None,
    note: str | None = None,
) -> Response:
    """One run: its counts and its jobs, with a cancel form for whoever may use it."""
    with reading(app.engine) as repo:
        run = repo.runs.load_run(name)
    unfinished = [j for j in run.jobs if not j.state.is_final]
    return page(
        request,
        "run.html",
        status=status,
        title=f"Run {name}",
        nav="runs",
        run=run,
        statuses=STATUSES,
        job_status=job_status,
        may_cancel=bool(unfinished) and all(may_change_job(session.user, j) for j in unfinished),
        error=error,
        note=note,
    )


@router.get("/runs/{name}")
def show_run(
    request: Request, name: str, app: StateDep, session: SessionDep, note: str | None = None
) -> Response:
    """One run and its jobs."""
    return run_page(request, app, session, name, note=NOTES.get(note or ""))


@router.post("/runs/{name}/cancel")
def cancel_run(
    request: Request,
    name: str,
    app: StateDep,
    session: FormSessionDep,
    reason: Annotated[str, Form(max_length=REASON_LIMIT)] = "",
) -> Response:
    """Cancel every unfinished job of the run."""
    try:
        body = form_body(CancelForm, {"reason": reason.strip() or None})
        with transaction(app.engine) as repo:
            done = cancel_the_run(repo, session.user, name, now=app.clock(), reason=body.reason)
    except Exception as exc:
        failure = refusal(exc)
        if failure is None:
            raise
        return run_page(request, app, session, name, status=failure.status, error=failure.message)
    post(app, done.events)
    note = "cancelled" if done.cancelled else "nothing-to-cancel"
    return RedirectResponse(f"{PREFIX}/runs/{name}?note={note}", status_code=303)
