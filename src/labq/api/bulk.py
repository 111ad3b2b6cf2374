"""``POST /jobs/cancel`` and ``POST /jobs/priority``: many jobs in one request, chosen by filter.

Like Slurm's ``scancel -u alice`` or ``scontrol update … Priority`` over a
selection. Permissions apply per job, as for one job: the jobs the caller may
not change are left alone and listed with why; the others change together, in
one transaction. ``dry_run`` says what would happen and changes nothing (the
CLI asks for confirmation with it).
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from fastapi import APIRouter
from pydantic import Field

from labq.api.openapi import answers
from labq.domain.priority import Priority
from labq.domain.states import RecipeState
from labq.gateway.deps import StateDep, UserDep
from labq.gateway.schemas import NO_NUL, Body, Name, PriorityLabel, Reason, RowId
from labq.store import transaction
from labq.store.selection import MAX_SELECTED
from labq.usecases import cancellation, priority, selection
from labq.usecases.posting import post_all
from labq.usecases.selection import BulkOutcome

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


def job_filter(body: JobFilter) -> selection.JobFilter:
    """The use case's filter for a filter body."""
    return selection.JobFilter(
        ids=tuple(body.ids),
        owner=body.owner,
        group=body.group,
        state=None if body.state is None else RecipeState(body.state),
        whiteboard=body.whiteboard,
        run=body.run,
        lab=body.lab,
        older_than_s=body.older_than_s,
    )


@router.post("/cancel", responses=answers(422))
def cancel_jobs(body: BulkCancel, app: StateDep, caller: UserDep) -> dict[str, Any]:
    """Cancel every unfinished recipe of each job picked that the caller may change."""
    with transaction(app.engine) as repo:
        done = cancellation.cancel_jobs(
            repo,
            caller,
            job_filter(body),
            now=app.clock(),
            reason=body.reason,
            dry_run=body.dry_run,
        )
    post_all(app.events, done.events)
    return answer(done, "cancelled")


@router.post("/priority", responses=answers(422))
def change_priorities(body: BulkPriority, app: StateDep, caller: UserDep) -> dict[str, Any]:
    """Set the nominal priority of the waiting sets of each job picked the caller may change.

    Raising a job's priority needs an admin, as for one job: such jobs are refused.
    """
    wanted = Priority.parse(body.priority)
    with transaction(app.engine) as repo:
        done = priority.change_priorities(
            repo, caller, job_filter(body), wanted, now=app.clock(), dry_run=body.dry_run
        )
    post_all(app.events, done.events)
    return {**answer(done, "sets"), "priority": wanted.label}


def answer(done: BulkOutcome, count: str) -> dict[str, Any]:
    """How many matched; which changed (or would: ``count`` null), which were refused and
    why."""
    return {
        "matched": done.matched,
        "changed": [{"id": c.job_id, count: c.count} for c in done.changed],
        "refused": [{"id": r.job_id, "reason": r.reason} for r in done.refused],
        "unchanged": done.unchanged,
        "dry_run": done.dry_run,
    }
