"""Extending the max_time of a job's running sets (Beaker's watchdog-extend).

Allowed to whoever may change the job (its owner, its group's members, admins).
The whole extension of a set is capped by ``limits.max_extend``. A set's
supervisor hears its new max_time with its next heartbeat: nothing is posted to
the scheduler.
"""

from __future__ import annotations

from datetime import datetime

from labq.domain.model import User
from labq.store import Repository
from labq.store.extensions import Extended
from labq.usecases.permissions import require_job_change


def extend_job(
    repo: Repository,
    caller: User,
    job_id: int,
    by: int,
    *,
    ceiling: int,
    now: datetime,
    set_id: int | None = None,
) -> list[Extended]:
    """Move the max_time of the job's running sets (or of set ``set_id``) ``by`` seconds."""
    require_job_change(caller, repo.jobs.load_job(job_id))
    return repo.extensions.extend_sets(
        job_id, by, ceiling=ceiling, actor=caller.name, now=now, set_id=set_id
    )
