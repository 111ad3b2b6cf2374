"""Log retention: which ended jobs' logs are due, and the record of each deletion."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import exists, func, insert, select

from labq.errors import NotFoundError
from labq.store.base import Db
from labq.store.columns import UTCDateTime
from labq.store.tables import Jobs, LogPrunes, RecipeSets


@dataclass(frozen=True)
class EndedJob:
    """A job every set of which has ended, with what retention needs of it."""

    id: int
    metadata: dict[str, Any]
    ended_at: datetime
    set_ids: tuple[int, ...]


@dataclass(frozen=True)
class PruneRecord:
    """When a job's logs were deleted, under which tag, and how much went."""

    tag: str
    deleted_at: datetime
    files: int
    bytes: int


class RetentionStore:
    """Ended jobs whose logs may be due, and which jobs' logs were deleted."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def ended_unpruned_jobs(
        self, ended_before: datetime, *, after: int = 0, limit: int = 500
    ) -> list[EndedJob]:
        """Jobs (ids above ``after``, in order) that ended by ``ended_before`` and whose
        logs are still kept: pages, since jobs kept forever stay in this list."""
        open_set = exists().where(RecipeSets.job_id == Jobs.id, RecipeSets.finished_at.is_(None))
        pruned = exists().where(LogPrunes.job_id == Jobs.id)
        ended = (
            select(
                RecipeSets.job_id,
                func.max(RecipeSets.finished_at, type_=UTCDateTime()).label("ended_at"),
            )
            .group_by(RecipeSets.job_id)
            .subquery()
        )
        stmt = (
            select(Jobs.id, Jobs.meta, ended.c.ended_at)
            .join(ended, ended.c.job_id == Jobs.id)
            .where(Jobs.id > after, ~open_set, ~pruned, ended.c.ended_at <= ended_before)
            .order_by(Jobs.id)
            .limit(limit)
        )
        rows = self.conn.execute(stmt).all()
        sets: dict[int, list[int]] = {job_id: [] for job_id, _, _ in rows}
        if sets:
            for set_id, job_id in self.conn.execute(
                select(RecipeSets.id, RecipeSets.job_id).where(RecipeSets.job_id.in_(sets))
            ):
                sets[job_id].append(set_id)
        return [
            EndedJob(job_id, meta, ended_at, tuple(sorted(sets[job_id])))
            for job_id, meta, ended_at in rows
        ]

    def record_prune(
        self, job_id: int, tag: str, *, files: int, size: int, actor: str, now: datetime
    ) -> bool:
        """Record that a job's logs were deleted (once; False if it was already)."""
        with self.db.atomic():
            if self.prune_record(job_id) is not None:
                return False
            self.conn.execute(
                insert(LogPrunes).values(
                    job_id=job_id, tag=tag, deleted_at=now, files=files, bytes=size
                )
            )
            self.db.log(
                now,
                actor,
                "job",
                "logs-deleted",
                object_id=job_id,
                new=f"{files} files, {size} bytes",
                reason=f"retention tag {tag}",
            )
        return True

    def prune_record(self, job_id: int) -> PruneRecord | None:
        """When the job's logs were deleted; None while they are kept."""
        row = self.conn.execute(
            select(LogPrunes.tag, LogPrunes.deleted_at, LogPrunes.files, LogPrunes.bytes).where(
                LogPrunes.job_id == job_id
            )
        ).one_or_none()
        return None if row is None else PruneRecord(*row)

    def job_ended_at(self, job_id: int) -> datetime | None:
        """When the job's last set ended; None while one has not (or no such job: raises)."""
        found = self.conn.execute(select(Jobs.id).where(Jobs.id == job_id)).scalar_one_or_none()
        if found is None:
            raise NotFoundError(f"no job {job_id}")
        open_count, last = self.conn.execute(
            select(
                func.count() - func.count(RecipeSets.finished_at),
                func.max(RecipeSets.finished_at, type_=UTCDateTime()),
            ).where(RecipeSets.job_id == job_id)
        ).one()
        return None if open_count or last is None else last
