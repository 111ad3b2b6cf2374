"""``/runs``: submit several jobs as one run, list runs, show one with its counts, cancel it.

A run is stored whole or not at all: every document is parsed and checked
before the transaction ends, and one bad document refuses the run, naming it.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from fastapi import APIRouter, Query
from pydantic import Field

from labq.api.jobs import CancelBody
from labq.api.jobviews import job_summary
from labq.api.openapi import answers
from labq.domain.events import JobSubmitted
from labq.formats.names import Format
from labq.gateway.deps import StateDep, UserDep
from labq.gateway.schemas import Body, Offset
from labq.store import reading, transaction
from labq.store.listing import MAX_PAGE
from labq.store.runs import RunSummary
from labq.usecases import cancellation, runs
from labq.usecases.posting import post_all

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
    documents = [runs.RunDocument(d.name, d.document, d.format) for d in body.jobs]
    jobs = runs.read_run(documents, limits=app.settings.limits)
    with transaction(app.engine) as repo:
        ids = runs.submit_run(repo, caller, body.name, jobs, now=app.clock(), meta=body.metadata)
    post_all(app.events, [JobSubmitted(job_id) for job_id in ids])
    return {"name": body.name, "jobs": ids, "url": f"/api/v1/runs/{body.name}"}


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
        done = cancellation.cancel_run(repo, caller, name, now=app.clock(), reason=reason)
    post_all(app.events, done.events)
    cancelled = {str(k): v for k, v in done.cancelled.items()}
    return {"name": name, "cancelled": cancelled, "note": done.note}
