"""Cancelling: one job, the jobs a filter picks, or every job of a run.

Cancelling stops every unfinished recipe of a job. It is allowed to the job's owner,
the members of its group, and admins (:mod:`.permissions`). Each job cancelled is
an event for the scheduler, to post once the transaction has committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from labq.domain.events import Event, JobsCancelled
from labq.domain.model import User
from labq.store import JobView, Repository
from labq.usecases.permissions import may_change_job, require_job_change
from labq.usecases.selection import BulkOutcome, Changed, JobFilter, Refused, picked


@dataclass(frozen=True)
class Cancelled:
    """What cancelling a job did: how many recipes it cancelled; why none, when none."""

    job_id: int
    count: int
    note: str | None

    @property
    def events(self) -> list[Event]:
        """What the scheduler must hear once this is committed."""
        return [JobsCancelled(self.job_id)] if self.count else []


def cancel_job(
    repo: Repository, caller: User, job_id: int, *, now: datetime, reason: str | None = None
) -> Cancelled:
    """Cancel every unfinished recipe of the job (its owner, its group, admins)."""
    job = repo.jobs.load_job(job_id)
    require_job_change(caller, job)
    count = repo.queue.cancel_job(job_id, actor=caller.name, now=now, reason=reason)
    note = None if count else f"{ended_or_ending(job)}: nothing to cancel"
    return Cancelled(job_id, count, note)


def ended_or_ending(job: JobView) -> str:
    """``job 3 is already completed (pass)``: why a change to it had nothing to change."""
    if not job.state.is_final:
        return f"job {job.id} is already being cancelled"
    result = "" if job.result is None else f" ({job.result.value})"
    return f"job {job.id} is already {job.state.value}{result}"


def refusal(user: User, job: JobView) -> str:
    """Why ``user`` may not change ``job``, in the words of a single-job refusal."""
    whose = f"{job.owner!r}" + (f" (group {job.group!r})" if job.group else "")
    return f"job {job.id} belongs to {whose}; {user.name!r} may not change it"


def cancel_jobs(
    repo: Repository,
    caller: User,
    chosen: JobFilter,
    *,
    now: datetime,
    reason: str | None = None,
    dry_run: bool = False,
) -> BulkOutcome:
    """Cancel every unfinished recipe of each job picked that the caller may change."""
    jobs = picked(repo, chosen.query(now))
    changed: list[Changed] = []
    refused: list[Refused] = []
    for job in jobs:
        if not may_change_job(caller, job):
            refused.append(Refused(job.id, refusal(caller, job)))
        elif dry_run:
            if not job.state.is_final:
                changed.append(Changed(job.id, None))
        else:
            count = repo.queue.cancel_job(job.id, actor=caller.name, now=now, reason=reason)
            if count:
                changed.append(Changed(job.id, count))
    events: list[Event] = [] if dry_run else [JobsCancelled(c.job_id) for c in changed]
    return BulkOutcome(len(jobs), changed, refused, dry_run, events)


@dataclass(frozen=True)
class RunCancelled:
    """What cancelling a run did: recipes cancelled per job; why none, when none."""

    name: str
    cancelled: dict[int, int]
    note: str | None
    events: Sequence[Event] = field(default=())


def cancel_run(
    repo: Repository, caller: User, name: str, *, now: datetime, reason: str | None = None
) -> RunCancelled:
    """Cancel every unfinished job of the run; the caller must be allowed to change each."""
    for job in repo.runs.load_run(name).jobs:
        if not job.state.is_final:
            require_job_change(caller, job)
    done = repo.runs.cancel_run(name, actor=caller.name, now=now, reason=reason)
    note = None
    if not done:
        note = f"run {name} has no job left to cancel: each has ended or is being cancelled"
    return RunCancelled(name, done, note, [JobsCancelled(job_id) for job_id in done])
