"""``POST /jobs/cancel`` and ``POST /jobs/priority``: many jobs in one request, chosen by filter.

Like Slurm's ``scancel -u alice`` or ``scontrol update … Priority`` over a
selection. Permissions apply per job, as for one job: the jobs the caller may
not change are left alone and listed with why; the others change together, in
one transaction. ``dry_run`` says what would happen and changes nothing (the
CLI asks for confirmation with it).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Annotated, Any, Final

from fastapi import APIRouter
from pydantic import Field

from labq.api.deps import AppState, StateDep, UserDep
from labq.api.errors import ApiError
from labq.api.events import tell
from labq.api.openapi import answers
from labq.api.schemas import NO_NUL, Body, Name, PriorityLabel, Reason, RowId
from labq.domain.model import User
from labq.domain.priority import Priority
from labq.domain.states import RecipeState
from labq.store import JobView, RecipeSetView, Repository, transaction
from labq.store.selection import MAX_SELECTED, JobQuery
from labq.usecases.permissions import may_change_job

router = APIRouter(prefix="/jobs", tags=["jobs"])

StateLabel = Annotated[str, Field(pattern="^(" + "|".join(s.value for s in RecipeState) + ")$")]
Glob = Annotated[str, Field(min_length=1, max_length=255), NO_NUL]
MAX_AGE_S: Final = 100 * 365 * 86400.0  # a longer age than any job can have


class JobFilter(Body):
    """Which jobs: every filter given must hold (ids too, when given)."""

    ids: Annotated[list[RowId], Field(max_length=MAX_SELECTED)] = Field(default_factory=list)
    owner: Name | None = None
    group: Name | None = None
    state: StateLabel | None = None
    whiteboard: Glob | None = None
    run: Name | None = None
    lab: Name | None = None
    older_than_s: Annotated[float, Field(gt=0, le=MAX_AGE_S)] | None = None
    dry_run: bool = False


class BulkCancel(JobFilter):
    """Which jobs, and why they are cancelled (optional)."""

    reason: Reason | None = None


class BulkPriority(JobFilter):
    """Which jobs, and their new nominal priority."""

    priority: PriorityLabel


def job_query(body: JobFilter, app: AppState) -> JobQuery:
    """The store's query for a filter body; 422 when it would pick every job."""
    before = None
    if body.older_than_s is not None:
        before = app.clock() - timedelta(seconds=body.older_than_s)
    query = JobQuery(
        owner=body.owner,
        group=body.group,
        state=None if body.state is None else RecipeState(body.state),
        whiteboard=body.whiteboard,
        run=body.run,
        lab=body.lab,
        submitted_before=before,
        ids=tuple(body.ids),
    )
    if query.empty():
        raise ApiError(422, "give job ids or at least one filter", place="ids")
    return query


def refusal(user: User, job: JobView) -> str:
    """Why ``user`` may not change ``job``, in the words of a single-job refusal."""
    whose = f"{job.owner!r}" + (f" (group {job.group!r})" if job.group else "")
    return f"job {job.id} belongs to {whose}; {user.name!r} may not change it"


def _picked(repo: Repository, query: JobQuery) -> list[JobView]:
    return repo.jobs.load_jobs(repo.jobs.select_job_ids(query))


@router.post("/cancel", responses=answers(422))
def cancel_jobs(body: BulkCancel, app: StateDep, caller: UserDep) -> dict[str, Any]:
    """Cancel every unfinished recipe of each job picked that the caller may change."""
    query = job_query(body, app)
    changed: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    with transaction(app.engine) as repo:
        jobs = _picked(repo, query)
        for job in jobs:
            if not may_change_job(caller, job):
                refused.append({"id": job.id, "reason": refusal(caller, job)})
            elif body.dry_run:
                if not job.state.is_final:
                    changed.append({"id": job.id, "cancelled": None})
            else:
                count = repo.queue.cancel_job(
                    job.id, actor=caller.name, now=app.clock(), reason=body.reason
                )
                if count:
                    changed.append({"id": job.id, "cancelled": count})
    if not body.dry_run:
        _tell_each(changed, app.events.jobs_cancelled)
    return _answer(jobs, changed, refused, body.dry_run)


@router.post("/priority", responses=answers(422))
def change_priorities(body: BulkPriority, app: StateDep, caller: UserDep) -> dict[str, Any]:
    """Set the nominal priority of the waiting sets of each job picked the caller may change.

    Raising a job's priority needs an admin, as for one job: such jobs are refused.
    """
    query = job_query(body, app)
    wanted = Priority.parse(body.priority)
    changed: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    with transaction(app.engine) as repo:
        jobs = _picked(repo, query)
        for job in jobs:
            why = _priority_refusal(caller, job, wanted)
            if why is not None:
                refused.append({"id": job.id, "reason": why})
            elif body.dry_run:
                if any(s.spec.priority != wanted for s in _waiting(job)):
                    changed.append({"id": job.id, "sets": None})
            else:
                sets = repo.queue.change_priority(
                    job.id, wanted, actor=caller.name, now=app.clock()
                )
                if sets:
                    changed.append({"id": job.id, "sets": len(sets)})
    if not body.dry_run:
        _tell_each(changed, app.events.priority_changed)
    answer = _answer(jobs, changed, refused, body.dry_run)
    return {**answer, "priority": wanted.label}


def _tell_each(changed: list[dict[str, Any]], event: Callable[[int], None]) -> None:
    """Tell the scheduler of each job changed, after the commit."""
    for done in changed:
        tell(partial(event, int(done["id"])))


def _waiting(job: JobView) -> list[RecipeSetView]:
    return [s for s in job.sets if s.started_at is None and s.finished_at is None]


def _priority_refusal(user: User, job: JobView, wanted: Priority) -> str | None:
    if not may_change_job(user, job):
        return refusal(user, job)
    raised = [s for s in _waiting(job) if s.spec.priority < wanted]
    if raised and not user.admin:
        was = max(s.spec.priority for s in raised).label
        return f"raising job {job.id} from {was} to {wanted.label} needs an admin"
    return None


def _answer(
    jobs: list[JobView],
    changed: list[dict[str, Any]],
    refused: list[dict[str, Any]],
    dry_run: bool,
) -> dict[str, Any]:
    """How many matched; which changed (or would), which were refused and why."""
    return {
        "matched": len(jobs),
        "changed": changed,
        "refused": refused,
        "unchanged": len(jobs) - len(changed) - len(refused),
        "dry_run": dry_run,
    }
