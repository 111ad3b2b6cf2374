"""Changing the nominal priority of a job's waiting sets: one job, or the jobs a filter picks.

Allowed to whoever may change the job (its owner, its group's members, admins);
raising any waiting set's priority needs an admin. Sets that have started keep
theirs. Each job changed is an event for the scheduler, to post once committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from labq.domain.events import Event, PriorityChanged
from labq.domain.model import User
from labq.domain.priority import Priority
from labq.errors import ForbiddenError
from labq.store import JobView, RecipeSetView, Repository
from labq.usecases.cancellation import ended_or_ending, refusal
from labq.usecases.permissions import may_change_job, require_job_change
from labq.usecases.selection import BulkOutcome, Changed, JobFilter, Refused, picked


@dataclass(frozen=True)
class Reprioritised:
    """What changing a job's priority did: the sets changed; why none, when none."""

    job_id: int
    priority: Priority
    sets: list[int]
    note: str | None

    @property
    def events(self) -> list[Event]:
        """What the scheduler must hear once this is committed."""
        return [PriorityChanged(self.job_id)] if self.sets else []


def change_priority(
    repo: Repository, caller: User, job_id: int, wanted: Priority, *, now: datetime
) -> Reprioritised:
    """Set the nominal priority of the job's sets that still wait."""
    job = repo.jobs.load_job(job_id)
    require_job_change(caller, job)
    raising = _raising(caller, job, wanted)
    if raising is not None:
        raise ForbiddenError(raising, place="priority")
    changed = repo.queue.change_priority(job_id, wanted, actor=caller.name, now=now)
    note = None if changed else _no_waiting_set(job)
    return Reprioritised(job_id, wanted, changed, note)


def change_priorities(
    repo: Repository,
    caller: User,
    chosen: JobFilter,
    wanted: Priority,
    *,
    now: datetime,
    dry_run: bool = False,
) -> BulkOutcome:
    """Set the nominal priority of the waiting sets of each job picked the caller may change;
    jobs it would raise are refused unless the caller is an admin."""
    jobs = picked(repo, chosen.query(now))
    changed: list[Changed] = []
    refused: list[Refused] = []
    for job in jobs:
        why = refusal(caller, job) if not may_change_job(caller, job) else None
        why = why or _raising(caller, job, wanted)
        if why is not None:
            refused.append(Refused(job.id, why))
        elif dry_run:
            if any(s.spec.priority != wanted for s in waiting_sets(job)):
                changed.append(Changed(job.id, None))
        else:
            sets = repo.queue.change_priority(job.id, wanted, actor=caller.name, now=now)
            if sets:
                changed.append(Changed(job.id, len(sets)))
    events: list[Event] = [] if dry_run else [PriorityChanged(c.job_id) for c in changed]
    return BulkOutcome(len(jobs), changed, refused, dry_run, events)


def waiting_sets(job: JobView) -> list[RecipeSetView]:
    """Sets that have neither started nor ended: their priority may still change."""
    return [s for s in job.sets if s.started_at is None and s.finished_at is None]


def _raising(caller: User, job: JobView, wanted: Priority) -> str | None:
    """Why a non-admin may not set ``wanted``: it raises a waiting set (None: it may)."""
    raised = [s for s in waiting_sets(job) if s.spec.priority < wanted]
    if raised and not caller.admin:
        was = max(s.spec.priority for s in raised).label
        return f"raising job {job.id} from {was} to {wanted.label} needs an admin"
    return None


def _no_waiting_set(job: JobView) -> str:
    if job.state.is_final:
        return f"{ended_or_ending(job)}: no set waits, so no priority changed"
    return f"job {job.id} has started: no set waits, so no priority changed"
