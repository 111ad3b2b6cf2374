"""``/jobs``: submit (any format), list, show, results, logs; cancel and priority.

A job document is the request body; its ``Content-Type`` (or ``?format=``) says
how to read it. Logs are served only from inside the data directory, and only
the files of the job's own recipes.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import FileResponse, Response

from labq.api.jobviews import job_json, job_summary, results_json
from labq.api.openapi import answers
from labq.api.rows import Glob, Text
from labq.domain.priority import Priority
from labq.domain.states import RecipeState
from labq.formats.names import Format
from labq.gateway.deps import StateDep, UserDep
from labq.gateway.errors import ApiError
from labq.gateway.schemas import Body, Offset, PriorityLabel, Reason, RowId
from labq.gateway.submitting import submit_document
from labq.store import reading, transaction
from labq.store.listing import MAX_PAGE
from labq.store.selection import JobQuery
from labq.usecases import cancellation, priority
from labq.usecases.forecasts import forecasts_of
from labq.usecases.junit import junit_xml
from labq.usecases.logs import log_file, log_files, log_reader
from labq.usecases.posting import post_all
from labq.usecases.queries import find_jobs

router = APIRouter(prefix="/jobs", tags=["jobs"])

MAX_PATH: Final = 4096  # PATH_MAX on Linux

MEDIA_FORMATS: dict[str, Format] = {
    "application/json": "native",
    "application/yaml": "auto",
    "application/x-yaml": "auto",
    "text/yaml": "auto",
    "application/xml": "beaker",
    "text/xml": "beaker",
}
DOCUMENT: Final = {"type": "string", "description": "docs/job-format*.md"}
JOB_BODY = {
    "requestBody": {
        "required": True,
        "description": (
            "a job document: native JSON/YAML, Beaker XML or Teuthology YAML. The schema is"
            " only its outer shape: what the document must hold is its format's (a native one"
            " needs recipe_sets, so {} is refused with 422 naming it; docs/job-format.md)"
        ),
        "content": {
            media: {"schema": {"type": "object"} if media == "application/json" else DOCUMENT}
            for media in MEDIA_FORMATS
        },
    }
}


class CancelBody(Body):
    """Why (optional)."""

    reason: Reason | None = None


class PriorityBody(Body):
    """The new nominal priority."""

    priority: PriorityLabel


async def raw_body(request: Request) -> bytes:
    """The request body (already capped by the guard)."""
    return await request.body()


def _format_of(content_type: str | None, asked: Format | None) -> Format:
    if asked is not None:
        return asked
    media = (content_type or "").split(";")[0].strip().lower()
    if media not in MEDIA_FORMATS:
        known = ", ".join(MEDIA_FORMATS)
        raise ApiError(415, f"send the job as one of {known}, or name it with ?format=")
    return MEDIA_FORMATS[media]


@router.post("", status_code=201, openapi_extra=JOB_BODY, responses=answers(403, 409, 415, 422))
def submit_job(
    app: StateDep,
    caller: UserDep,
    body: Annotated[bytes, Depends(raw_body)],
    content_type: Annotated[str | None, Header()] = None,
    fmt: Annotated[Format | None, Query(alias="format")] = None,
) -> dict[str, Any]:
    """Parse and store a job; the scheduler is told once it is committed."""
    job_id, read_as = submit_document(app, caller, body, _format_of(content_type, fmt))
    return {"id": job_id, "format": read_as, "url": f"/api/v1/jobs/{job_id}"}


@router.get("")
def list_jobs(
    app: StateDep,
    _: UserDep,
    owner: Text = None,
    group: Text = None,
    state: RecipeState | None = None,
    whiteboard: Glob = None,
    run: Text = None,
    lab: Text = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    offset: Offset = 0,
) -> dict[str, Any]:
    """A page of jobs, newest first, and how many match in all; waiting ones say why, and
    each job's ``forecasts`` (its unfinished sets', as ``GET /queue`` gives them)."""
    query = JobQuery(owner, group, state, whiteboard, run, lab)
    with reading(app.engine) as repo:
        found = find_jobs(
            repo,
            query,
            limit=limit,
            offset=offset,
            now=app.clock(),
            queue=app.events.queue_view,
            forecasts=app.events.forecasts,
        )
    return {
        "total": found.total,
        "limit": limit,
        "offset": offset,
        "jobs": [{**job_summary(j), **found.rows[j.id]} for j in found.jobs],
    }


@router.get("/{job_id}", responses=answers(404))
def show_job(job_id: RowId, app: StateDep, _: UserDep) -> dict[str, Any]:
    """A job with every set (retries included), recipe and task; ``forecasts``: when each of
    its waiting and running sets should start and end (as ``GET /queue`` gives them)."""
    with reading(app.engine) as repo:
        job = repo.jobs.load_job(job_id)
    forecasts = forecasts_of(app.events.forecasts(), (s.id for s in job.current_sets))
    return {**job_json(job), "forecasts": forecasts}


@router.get("/{job_id}/history", responses=answers(404))
def job_history(job_id: RowId, app: StateDep, _: UserDep) -> dict[str, Any]:
    """Every state each recipe went through, with when and why."""
    with reading(app.engine) as repo:
        job = repo.jobs.load_job(job_id)
        recipes = [
            {
                "id": recipe.id,
                "set": rset.id,
                "system": recipe.system,
                "history": [
                    {"state": h.state.value, "at": h.at, "reason": h.reason}
                    for h in repo.moves.recipe_history(recipe.id)
                ],
            }
            for rset in job.sets
            for recipe in rset.recipes
        ]
    return {"id": job_id, "recipes": recipes}


RESULTS_ANSWER: Final[dict[int | str, dict[str, Any]]] = {
    200: {
        "description": "the results as JSON; with ?format=junit, as JUnit XML",
        "content": {"application/json": {}, "application/xml": {"schema": {"type": "string"}}},
    }
}


@router.get("/{job_id}/results", responses={**answers(404, 422), **RESULTS_ANSWER})
def job_results(
    job_id: RowId,
    app: StateDep,
    _: UserDep,
    fmt: Annotated[Literal["json", "junit"], Query(alias="format")] = "json",
) -> Any:
    """Results of every recipe and task; ``?format=junit``: as JUnit XML, logs attached."""
    with reading(app.engine) as repo:
        job = repo.jobs.load_job(job_id)
    if fmt == "junit":
        document = junit_xml(job, log_reader(app.settings.data_path()))
        return Response(document, media_type="application/xml")
    return results_json(job)


@router.post("/{job_id}/cancel", responses=answers(404, 409))
def cancel_job(
    job_id: RowId, app: StateDep, caller: UserDep, body: CancelBody | None = None
) -> dict[str, Any]:
    """Cancel every unfinished recipe (the owner, the job's group, admins); ``note`` says why
    nothing was cancelled (null when something was)."""
    reason = None if body is None else body.reason
    with transaction(app.engine) as repo:
        done = cancellation.cancel_job(repo, caller, job_id, now=app.clock(), reason=reason)
    post_all(app.events, done.events)
    return {"id": job_id, "cancelled": done.count, "note": done.note}


@router.post("/{job_id}/priority", responses=answers(404, 409))
def change_priority(
    job_id: RowId, body: PriorityBody, app: StateDep, caller: UserDep
) -> dict[str, Any]:
    """Change the nominal priority of the sets that still wait; raising it needs an admin.
    ``note`` says why no set changed (null when one did)."""
    wanted = Priority.parse(body.priority)
    with transaction(app.engine) as repo:
        done = priority.change_priority(repo, caller, job_id, wanted, now=app.clock())
    post_all(app.events, done.events)
    return {"id": job_id, "priority": wanted.label, "sets": done.sets, "note": done.note}


@router.get("/{job_id}/logs", responses=answers(404))
def list_logs(job_id: RowId, app: StateDep, _: UserDep) -> dict[str, Any]:
    """Each recipe's archived log files, as paths relative to the data directory, and when
    retention deleted them (``logs_deleted_at``; null while they are kept)."""
    with reading(app.engine) as repo:
        job = repo.jobs.load_job(job_id)
        pruned = repo.retention.prune_record(job_id)
    logs = log_files(job, app.settings.data_path())
    return {
        "id": job_id,
        "logs": logs,
        "logs_deleted_at": None if pruned is None else pruned.deleted_at,
    }


@router.get("/{job_id}/logs/file", response_class=FileResponse, responses=answers(403, 404))
def get_log(
    job_id: RowId,
    app: StateDep,
    _: UserDep,
    path: Annotated[str, Query(min_length=1, max_length=MAX_PATH)],
) -> FileResponse:
    """One log file of the job, by the path the listing gave (plain text)."""
    with reading(app.engine) as repo:
        wanted = log_file(repo, job_id, app.settings.data_path(), path)
    return FileResponse(wanted, media_type="text/plain; charset=utf-8")
