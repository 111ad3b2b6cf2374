"""Log retention: a job's tag and when its logs expire, and the pruning pass that deletes
the logs of jobs whose retention has run out, and records it.

The files go first, then the record: a crash between the two deletes nothing more the
next time and records it then. Only files inside the data directory are touched.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine

from labq.config import Retention
from labq.dispatch.logs import set_log_dir
from labq.domain.model import User
from labq.domain.retention import expired, expires_at, job_tag
from labq.store import Repository, reading, transaction
from labq.store.retention import PruneRecord
from labq.usecases.permissions import require_admin

log = logging.getLogger("labq.retention")
_PAGE = 500


@dataclass(frozen=True)
class Pruned:
    """One job whose logs were deleted."""

    job_id: int
    tag: str
    files: int
    bytes: int


@dataclass(frozen=True)
class JobRetention:
    """A job's retention tag, its lifetime in days (None: kept for ever), whether the
    settings know the tag, when the job ended and its logs expire, and their deletion."""

    tag: str
    lifetime_days: float | None
    known_tag: bool
    ended_at: datetime | None
    expires_at: datetime | None
    deleted: PruneRecord | None


def job_retention(repo: Repository, job_id: int, retention: Retention) -> JobRetention:
    """The job's retention tag and its lifetime; when its logs expire, or were deleted."""
    ended = repo.retention.job_ended_at(job_id)
    job = repo.jobs.load_job(job_id)
    record = repo.retention.prune_record(job_id)
    tag = job_tag(job.spec.metadata, retention.default)
    return JobRetention(
        tag=tag,
        lifetime_days=retention.tags.get(tag),
        known_tag=tag in retention.tags,
        ended_at=ended,
        expires_at=None if ended is None else expires_at(ended, tag, retention.tags),
        deleted=record,
    )


def prune_logs(
    engine: Engine, caller: User, retention: Retention, data_dir: Path, *, now: datetime
) -> list[Pruned]:
    """Delete the logs of every job whose retention has run out, now (admins)."""
    require_admin(caller)
    return prune(engine, retention, data_dir, now=now, actor=caller.name)


def prune(
    engine: Engine, retention: Retention, data_dir: Path, *, now: datetime, actor: str = "labq"
) -> list[Pruned]:
    """Delete every expired job's logs (as of ``now``) and record each deletion."""
    lifetimes = [days for days in retention.tags.values() if days is not None]
    if not lifetimes:
        return []
    ended_before = now - timedelta(days=min(lifetimes))  # nothing younger can be due
    done: list[Pruned] = []
    after = 0
    while True:
        with reading(engine) as repo:
            batch = repo.retention.ended_unpruned_jobs(ended_before, after=after, limit=_PAGE)
        for job in batch:
            tag = job_tag(job.metadata, retention.default)
            if not expired(job.ended_at, tag, retention.tags, now):
                continue
            files, size = _delete(data_dir, job.set_ids)
            with transaction(engine) as repo:
                if repo.retention.record_prune(
                    job.id, tag, files=files, size=size, actor=actor, now=now
                ):
                    done.append(Pruned(job.id, tag, files, size))
        if len(batch) < _PAGE:
            break
        after = batch[-1].id
    if done:
        log.info("deleted the logs of %d jobs whose retention ran out", len(done))
    return done


def _delete(data_dir: Path, set_ids: tuple[int, ...]) -> tuple[int, int]:
    """Remove the sets' log folders: ``(files, bytes)`` removed."""
    root = data_dir.resolve()
    files = size = 0
    for set_id in set_ids:
        folder = set_log_dir(data_dir, set_id)
        if not folder.resolve().is_relative_to(root) or not folder.is_dir():
            continue
        for path in folder.rglob("*"):
            if path.is_file() and not path.is_symlink():
                files += 1
                size += path.stat().st_size
        shutil.rmtree(folder, ignore_errors=True)
    return files, size
