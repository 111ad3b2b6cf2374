"""``/runs``: submit several jobs as one run, list runs, show one with its counts, cancel it.

A run is stored whole or not at all: every document is parsed and checked
before the transaction ends, and one bad document refuses the run, naming it.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Annotated, Any, Final

from fastapi import APIRouter, Query
from pydantic import Field

from labq.api.deps import StateDep, UserDep
from labq.api.errors import ApiError
from labq.api.events import tell
from labq.api.feasibility import Fleet
from labq.api.jobs import CancelBody, pin_ref, store_job
from labq.api.jobviews import job_summary
from labq.api.openapi import answers
from labq.api.schemas import Body, Offset
from labq.domain.job import JobSpec
from labq.domain.model import User
from labq.errors import InputError
from labq.formats.loader import Format, detect_format, read_job
from labq.formats.origins import Origins
from labq.store import Repository, reading, transaction
from labq.store.listing import MAX_PAGE
from labq.store.runs import RunSummary
from labq.usecases.permissions import require_job_change

router = APIRouter(prefix="/runs", tags=["runs"])

MAX_RUN_JOBS: Final = 10_000
Text = Annotated[str, Field(min_length=1, max_length=16 * 1024 * 1024)]
Label = Annotated[str, Field(min_length=1, max_length=1000)]


class RunDocument(Body):
    """One job of the run: its document, what to call it in errors, its format."""

    name: Label
    document: Text
    format: Format = "auto"


class RunBody(Body):
    """A new run: its unique name, where it came from, its jobs in order."""

    name: Annotated[str, Field(min_length=1, max_length=200)]
    metadata: dict[str, Any] = Field(default_factory=dict)
    jobs: Annotated[list[RunDocument], Field(min_length=1, max_length=MAX_RUN_JOBS)]


def summary_json(run: RunSummary) -> dict[str, Any]:
    """A run's line in a listing: who, when, counts."""
    return {
        "name": run.name,
        "owner": run.owner,
        "created_at": run.created_at,
        "metadata": run.meta,
        "counts": run.counts,
        "total": run.total,
        "url": f"/api/v1/runs/{run.name}",
    }


@router.post("", status_code=201, responses=answers(403, 409, 422))
def submit_run(body: RunBody, app: StateDep, caller: UserDep) -> dict[str, Any]:
    """Store every job of the run in one transaction; the scheduler is told once it commits."""
    limits = app.settings.limits
    specs = []
    for doc in body.jobs:
        fmt: Format = detect_format(doc.document) if doc.format == "auto" else doc.format
        spec, origins = read_job(doc.document, source=doc.name, fmt=fmt, limits=limits)
        specs.append((pin_ref(spec), fmt, origins))
    now = app.clock()
    with transaction(app.engine) as repo:
        run_id = repo.runs.create_run(body.name, owner=caller.name, now=now, meta=body.metadata)
        # storing a job changes no system or pool: every job is checked against one load
        fleet = Fleet.of(repo.systems.list_systems(), repo.access.load_access_policy())
        ids = [
            _store_named(repo, caller, doc, spec, fmt, origins, now=now, run_id=run_id, fleet=fleet)
            for doc, (spec, fmt, origins) in zip(body.jobs, specs, strict=True)
        ]
    for job_id in ids:
        tell(partial(app.events.job_submitted, job_id))
    return {"name": body.name, "jobs": ids, "url": f"/api/v1/runs/{body.name}"}


def _store_named(
    repo: Repository,
    caller: User,
    doc: RunDocument,
    spec: JobSpec,
    fmt: str,
    origins: Origins,
    *,
    now: datetime,
    run_id: int,
    fleet: Fleet,
) -> int:
    """``store_job``, its refusals naming the document they are about."""
    try:
        return store_job(
            repo,
            caller,
            spec,
            fmt,
            now=now,
            run_id=run_id,
            source=doc.document,
            fleet=fleet,
            origins=origins,
        )
    except ApiError as exc:
        raise ApiError(exc.status, f"{doc.name}: {exc.message}", place=exc.place) from None
    except InputError as exc:
        raise exc.within(source=doc.name) from None


@router.get("")
def list_runs(
    app: StateDep,
    _: UserDep,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    offset: Offset = 0,
) -> dict[str, Any]:
    """A page of runs, newest first, each with its counts."""
    with reading(app.engine) as repo:
        total = repo.runs.count_runs()
        runs = repo.runs.list_runs(limit=limit, offset=offset)
    return {
        "total": total,
        "limit": limit,
        "offset": offset,
        "runs": [summary_json(r) for r in runs],
    }


@router.get("/{name}", responses=answers(404))
def show_run(name: str, app: StateDep, _: UserDep) -> dict[str, Any]:
    """A run with its counts and every job in it."""
    with reading(app.engine) as repo:
        run = repo.runs.load_run(name)
    return {**summary_json(run.summary), "jobs": [job_summary(j) for j in run.jobs]}


@router.post("/{name}/cancel", responses=answers(403, 404))
def cancel_run(
    name: str, app: StateDep, caller: UserDep, body: CancelBody | None = None
) -> dict[str, Any]:
    """Cancel every unfinished job of the run (each job's owner, group, or an admin); ``note``
    says why nothing was cancelled (null when something was)."""
    reason = None if body is None else body.reason
    with transaction(app.engine) as repo:
        for job in repo.runs.load_run(name).jobs:
            if not job.state.is_final:
                require_job_change(caller, job)
        done = repo.runs.cancel_run(name, actor=caller.name, now=app.clock(), reason=reason)
    for job_id in done:
        tell(partial(app.events.jobs_cancelled, job_id))
    note = None
    if not done:
        note = f"run {name} has no job left to cancel: each has ended or is being cancelled"
    return {"name": name, "cancelled": {str(k): v for k, v in done.items()}, "note": note}
