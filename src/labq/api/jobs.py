"""``/jobs``: submit (any format), list, show, results, logs; cancel and priority.

A job document is the request body; its ``Content-Type`` (or ``?format=``) says
how to read it. Logs are served only from inside the data directory, and only
the files of the job's own recipes.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import FileResponse, Response

from labq.api.deps import StateDep, UserDep
from labq.api.errors import ApiError
from labq.api.events import tell
from labq.api.feasibility import Fleet, refuse_unrunnable
from labq.api.filters import admit_job
from labq.api.jobviews import job_json, job_summary, log_files, log_reader, results_json
from labq.api.junit import junit_xml
from labq.api.openapi import answers
from labq.api.rows import Glob, Text, job_row, reasons_by_job
from labq.api.schemas import Body, Offset, PriorityLabel, Reason, RowId
from labq.dispatch.workspace import RefError, resolve_ref
from labq.domain.job import JobSpec
from labq.domain.model import User
from labq.domain.priority import Priority
from labq.domain.retention import check_tag, job_tag
from labq.domain.states import RecipeState
from labq.formats.loader import Format, detect_format, read_job
from labq.formats.origins import Origins
from labq.formats.source import decode_document
from labq.store import Repository, reading, transaction
from labq.store.listing import MAX_PAGE
from labq.store.selection import JobQuery
from labq.store.views import JobView
from labq.usecases.permissions import require_job_change

router = APIRouter(prefix="/jobs", tags=["jobs"])

MAX_PATH: Final = 4096  # PATH_MAX on Linux
MAX_NAME_BYTES: Final = 255  # NAME_MAX: one component of a path

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
    chosen = _format_of(content_type, fmt)
    limits = app.settings.limits
    text = decode_document(body, source="job", limit=limits.document_bytes)
    if chosen == "auto":
        chosen = detect_format(text)
    with app.documents.turn(len(body)):  # parsed on this worker thread, large ones in turn
        parsed, origins = read_job(text, source="job", fmt=chosen, limits=limits)
    spec = pin_ref(parsed)
    check_tag(job_tag(spec.metadata, app.settings.retention.default), app.settings.retention.tags)
    with transaction(app.engine) as repo:
        job_id = store_job(
            repo, caller, spec, chosen, now=app.clock(), source=text, origins=origins
        )
    tell(lambda: app.events.job_submitted(job_id))
    return {"id": job_id, "format": chosen, "url": f"/api/v1/jobs/{job_id}"}


def store_job(
    repo: Repository,
    caller: User,
    spec: JobSpec,
    fmt: str,
    *,
    now: datetime,
    run_id: int | None = None,
    source: str | None = None,
    fleet: Fleet | None = None,
    origins: Origins | None = None,
) -> int:
    """Store one parsed job for ``caller`` with every check a submission passes.

    ``source`` is the document it was parsed from, kept verbatim for ``clone``; ``fleet``
    the systems to check it against, when the caller loaded them (the jobs of a run);
    ``origins`` where its parts came from in that document, for the line of a refusal.
    """
    user = repo.people.get_user(caller.name)
    group = spec.group
    if group is not None and group in repo.people.list_groups() and not user.member_of(group):
        raise ApiError(403, f"{user.name!r} is not a member of group {group!r}", place="group")
    job_id = repo.queue.submit_job(spec, owner=user.name, now=now, source_format=fmt, run_id=run_id)
    if source is not None:
        repo.sources.keep_source(job_id, source)
    admit_job(repo, job_id, spec)  # dependencies stored; a reject rule refuses it
    # a set no system can ever run is refused, and the transaction stores nothing
    if fleet is None:
        fleet = Fleet.of(repo.systems.list_systems(), repo.access.load_access_policy())
    refuse_unrunnable(spec, fleet, origins)
    return job_id


def pin_ref(spec: JobSpec) -> JobSpec:
    """A job's ``ref`` branch resolved to the commit every recipe will run (422 if it cannot be).

    A commit the job names itself is kept. Resolved before the transaction: asking
    the repository may take seconds, and no write lock is held meanwhile.
    """
    ref = spec.ref
    if ref is None or ref.commit is not None:
        return spec
    try:
        commit = resolve_ref(ref.repo, ref.branch)
    except RefError as exc:
        raise ApiError(422, f"cannot pin ref: {exc}", place="ref") from None
    return spec.model_copy(update={"ref": ref.model_copy(update={"commit": commit})})


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
    """A page of jobs, newest first, and how many match in all; waiting ones say why."""
    query = JobQuery(owner, group, state, whiteboard, run, lab)
    with reading(app.engine) as repo:
        total = repo.jobs.count_found(query)
        page = repo.jobs.find_jobs(query, limit=limit, offset=offset)
        runs = repo.jobs.run_names(j.id for j in page)
    reasons = reasons_by_job(app.events.queue_view()) if page else {}
    now = app.clock()
    return {
        "total": total,
        "limit": limit,
        "offset": offset,
        "jobs": [
            {**job_summary(j), **job_row(j, now, runs.get(j.id), reasons.get(j.id))} for j in page
        ],
    }


@router.get("/{job_id}", responses=answers(404))
def show_job(job_id: RowId, app: StateDep, _: UserDep) -> dict[str, Any]:
    """A job with every set (retries included), recipe and task."""
    with reading(app.engine) as repo:
        return job_json(repo.jobs.load_job(job_id))


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
    with transaction(app.engine) as repo:
        job = repo.jobs.load_job(job_id)
        require_job_change(caller, job)
        reason = None if body is None else body.reason
        count = repo.queue.cancel_job(job_id, actor=caller.name, now=app.clock(), reason=reason)
    if count:
        tell(lambda: app.events.jobs_cancelled(job_id))
    note = None if count else f"{_ended_or_ending(job)}: nothing to cancel"
    return {"id": job_id, "cancelled": count, "note": note}


def _ended_or_ending(job: JobView) -> str:
    """``job 3 is already completed (pass)``: why a change to it had nothing to change."""
    if not job.state.is_final:
        return f"job {job.id} is already being cancelled"
    result = "" if job.result is None else f" ({job.result.value})"
    return f"job {job.id} is already {job.state.value}{result}"


@router.post("/{job_id}/priority", responses=answers(404, 409))
def change_priority(
    job_id: RowId, body: PriorityBody, app: StateDep, caller: UserDep
) -> dict[str, Any]:
    """Change the nominal priority of the sets that still wait; raising it needs an admin.
    ``note`` says why no set changed (null when one did)."""
    wanted = Priority.parse(body.priority)
    with transaction(app.engine) as repo:
        job = repo.jobs.load_job(job_id)
        _check_priority(job, wanted, caller)
        changed = repo.queue.change_priority(job_id, wanted, actor=caller.name, now=app.clock())
    if changed:
        tell(lambda: app.events.priority_changed(job_id))
    note = None if changed else _no_waiting_set(job)
    return {"id": job_id, "priority": wanted.label, "sets": changed, "note": note}


def _no_waiting_set(job: JobView) -> str:
    if job.state.is_final:
        return f"{_ended_or_ending(job)}: no set waits, so no priority changed"
    return f"job {job.id} has started: no set waits, so no priority changed"


def _check_priority(job: JobView, wanted: Priority, caller: User) -> None:
    job_id = job.id
    require_job_change(caller, job)
    waiting = [s for s in job.sets if s.started_at is None and s.finished_at is None]
    raised = [s for s in waiting if s.spec.priority < wanted]
    if raised and not caller.admin:
        was = max(s.spec.priority for s in raised).label
        raise ApiError(
            403,
            f"raising job {job_id} from {was} to {wanted.label} needs an admin",
            place="priority",
        )


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
    root = app.settings.data_path().resolve()
    _check_log_path(path)
    wanted = (root / path).resolve()
    if not wanted.is_relative_to(root):
        raise ApiError(403, "that path leads out of the data directory", place="path")
    with reading(app.engine) as repo:
        job = repo.jobs.load_job(job_id)
    allowed = [Path(r.log_dir).resolve() for s in job.sets for r in s.recipes if r.log_dir]
    allowed += [
        Path(t.log_path).resolve()
        for s in job.sets
        for r in s.recipes
        for t in r.tasks
        if t.log_path
    ]
    if not any(wanted == a or wanted.is_relative_to(a) for a in allowed) or not _is_file(wanted):
        raise ApiError(404, f"job {job_id} has no log file {path!r}", place="path")
    return FileResponse(wanted, media_type="text/plain; charset=utf-8")


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a name too long for the file system, once joined to the data directory
        return False


def _check_log_path(path: str) -> None:
    """422 for a path no file system holds (a NUL never gets here: the guard refuses it)."""
    for part in path.split("/"):
        if len(part.encode()) > MAX_NAME_BYTES:
            raise ApiError(
                422, f"path: a component is longer than {MAX_NAME_BYTES} bytes", place="path"
            )
