"""The pruning pass: delete the logs of jobs whose retention has run out, and record it.

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
from labq.domain.retention import expired, job_tag
from labq.store import reading, transaction

log = logging.getLogger("labq.retention")
_PAGE = 500


@dataclass(frozen=True)
class Pruned:
    """One job whose logs were deleted."""

    job_id: int
    tag: str
    files: int
    bytes: int


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
