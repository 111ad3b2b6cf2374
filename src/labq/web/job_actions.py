"""What the pages change: cancel a job (or the jobs a filter shows), change its priority,
submit one from a file.

Each action calls the use case the API calls, so the permissions, the parsing and
the event told to the scheduler are exactly the API's. A refusal comes back as the
page the form was on, with the API's message and status.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Final, get_args

from fastapi import APIRouter, File, Form, Request, Response, UploadFile
from fastapi.responses import RedirectResponse

from labq.domain.priority import Priority
from labq.domain.states import RecipeState
from labq.formats.names import FORMATS, Format
from labq.gateway.deps import StateDep
from labq.gateway.schemas import Body, Name, PriorityLabel, Reason, RowId
from labq.gateway.submitting import submit_document
from labq.store import transaction
from labq.store.selection import JobQuery
from labq.usecases import cancellation
from labq.usecases import priority as priority_
from labq.usecases.selection import JobFilter
from labq.web.events import post
from labq.web.jobs import job_page, jobs_page
from labq.web.rendering import PREFIX, page
from labq.web.route import PageRoute, form_body, refusal
from labq.web.session import FormSessionDep, SessionDep

router = APIRouter(route_class=PageRoute, include_in_schema=False)


class CancelForm(Body):
    """Why (optional), checked as the API checks it."""

    reason: Reason | None = None


class FilterForm(CancelForm):
    """The list's filters a bulk cancel picks its jobs by, checked as the API checks them."""

    owner: Name | None = None
    group: Name | None = None
    state: RecipeState | None = None
    whiteboard: Name | None = None
    run: Name | None = None
    lab: Name | None = None


REASON_LIMIT: Final = 2000
NameField = Annotated[str | None, Form(max_length=255)]
FORMAT_NAMES: Final = {
    "auto": "recognise it",
    "native": "native YAML/JSON",
    "beaker": "Beaker job XML",
    "teuthology": "Teuthology YAML",
}


@router.post("/jobs/{job_id}/cancel")
def cancel(
    request: Request,
    job_id: RowId,
    app: StateDep,
    session: FormSessionDep,
    reason: Annotated[str, Form(max_length=REASON_LIMIT)] = "",
) -> Response:
    """Cancel the job's unfinished recipes (its owner, its group, admins)."""
    try:
        body = form_body(CancelForm, {"reason": reason.strip() or None})
        with transaction(app.engine) as repo:
            done = cancellation.cancel_job(
                repo, session.user, job_id, now=app.clock(), reason=body.reason
            )
    except Exception as exc:
        failure = refusal(exc)
        if failure is None:
            raise
        return job_page(request, app, session, job_id, status=failure.status, error=failure.message)
    post(app, done.events)
    note = "cancelled" if done.count else "nothing-to-cancel"
    return RedirectResponse(f"{PREFIX}/jobs/{job_id}?note={note}", status_code=303)


@router.post("/jobs/cancel")
def cancel_shown(
    request: Request,
    app: StateDep,
    session: FormSessionDep,
    owner: NameField = None,
    group: NameField = None,
    state: Annotated[RecipeState | None, Form()] = None,
    whiteboard: NameField = None,
    run: NameField = None,
    lab: NameField = None,
    reason: Annotated[str, Form(max_length=REASON_LIMIT)] = "",
) -> Response:
    """Cancel every job the list's filters pick that the reader may change (bulk cancel)."""
    found = JobQuery(owner=owner, group=group, state=state, whiteboard=whiteboard, run=run, lab=lab)
    fields = {"owner": owner, "group": group, "whiteboard": whiteboard, "run": run, "lab": lab}
    try:
        body = form_body(FilterForm, {**fields, "state": state, "reason": reason.strip() or None})
        chosen = JobFilter(
            owner=body.owner,
            group=body.group,
            state=body.state,
            whiteboard=body.whiteboard,
            run=body.run,
            lab=body.lab,
        )
        with transaction(app.engine) as repo:
            done = cancellation.cancel_jobs(
                repo, session.user, chosen, now=app.clock(), reason=body.reason
            )
    except Exception as exc:
        failure = refusal(exc)
        if failure is None:
            raise
        return jobs_page(request, app, found, status=failure.status, error=failure.message)
    post(app, done.events)
    cancelled = [f"J:{c.job_id}" for c in done.changed]
    note = f"{len(cancelled)} of the {done.matched} jobs matched were cancelled" + (
        f" ({', '.join(cancelled)})." if cancelled else "."
    )
    if done.refused:
        note += f" {len(done.refused)} refused (below)."
    refused = [r.reason for r in done.refused]
    return jobs_page(request, app, found, note=note, refused=refused)


@router.post("/jobs/{job_id}/priority")
def change_priority(
    request: Request,
    job_id: RowId,
    app: StateDep,
    session: FormSessionDep,
    priority: Annotated[PriorityLabel, Form()],
) -> Response:
    """Change the priority of the sets that still wait; raising it needs an admin."""
    wanted = Priority.parse(priority)
    try:
        with transaction(app.engine) as repo:
            done = priority_.change_priority(repo, session.user, job_id, wanted, now=app.clock())
    except Exception as exc:
        failure = refusal(exc)
        if failure is None:
            raise
        return job_page(request, app, session, job_id, status=failure.status, error=failure.message)
    post(app, done.events)
    note = "priority" if done.sets else "no-waiting-sets"
    return RedirectResponse(f"{PREFIX}/jobs/{job_id}?note={note}", status_code=303)


def _submit_page(
    request: Request,
    *,
    status: int = 200,
    error: str | None = None,
    chosen: str = "auto",
    problems: Sequence[str] = (),
) -> Response:
    return page(
        request,
        "submit.html",
        status=status,
        title="Submit a job",
        nav="submit",
        formats=FORMAT_NAMES,
        chosen=chosen,
        error=error,
        problems=problems,
    )


@router.get("/submit")
def submit_form(request: Request, session: SessionDep) -> Response:
    """The form to submit a job file."""
    return _submit_page(request)


@router.post("/submit")
def submit(
    request: Request,
    app: StateDep,
    session: FormSessionDep,
    job_file: Annotated[UploadFile, File()],
    fmt: Annotated[str, Form(alias="format")] = "auto",
) -> Response:
    """Parse the uploaded file with the API's loader and store the job."""
    if fmt not in FORMATS:
        return _submit_page(request, status=422, error=f"unknown format {fmt!r}")
    chosen: Format = next(f for f in get_args(Format) if f == fmt)
    # The guard has already capped the whole request at limits.document_bytes.
    data = job_file.file.read()
    try:
        job_id, _ = submit_document(app, session.user, data, chosen)
    except Exception as exc:
        failure = refusal(exc)
        if failure is None:
            raise
        name = job_file.filename or "job"
        problems = [_named(p["message"], name) for p in failure.problems]
        # several problems: every one in a list, not the first and a count
        message = f"{name} has {len(problems)} problems:" if problems else failure.message
        return _submit_page(
            request,
            status=failure.status,
            error=_named(message, name),
            chosen=fmt,
            problems=problems,
        )
    return RedirectResponse(f"{PREFIX}/jobs/{job_id}?note=submitted", status_code=303)


def _named(message: str, name: str) -> str:
    """The API names the document "job"; the form knows its file name."""
    return name + message[3:] if message.startswith("job:") else message
