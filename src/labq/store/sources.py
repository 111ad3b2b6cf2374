"""What a job was submitted as, and what it was cloned from (``labq job clone``).

The document is kept verbatim in its own table, once, when the job is stored; a
job stored before labq kept documents has none, and is cloned from its canonical
spec instead.
"""

from __future__ import annotations

from sqlalchemy import func, insert, select, update
from sqlalchemy.orm import aliased

from labq.errors import NotFoundError
from labq.store.base import Db
from labq.store.tables import Jobs, JobSources, RecipeSets


class SourceStore:
    """The submitted documents of jobs, and the links from clones to their originals."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def keep_source(self, job_id: int, document: str) -> None:
        """Keep the document ``job_id`` was submitted as."""
        with self.db.atomic():
            self.conn.execute(insert(JobSources).values(job_id=job_id, document=document))

    def job_source(self, job_id: int) -> str | None:
        """The document the job was submitted as (None: submitted before documents were kept).

        NotFoundError when there is no such job.
        """
        row = self.conn.execute(
            select(Jobs.id, JobSources.document)
            .outerjoin(JobSources, JobSources.job_id == Jobs.id)
            .where(Jobs.id == job_id)
        ).one_or_none()
        if row is None:
            raise NotFoundError(f"no job {job_id}")
        document: str | None = row.document
        return document

    def mark_clone(self, job_id: int, *, of: int) -> None:
        """Record that ``job_id`` was cloned from job ``of``; its sets take the source keys of
        the original's sets at the same positions (a clone chain is one job's history)."""
        with self.db.atomic():
            self.conn.execute(update(Jobs).where(Jobs.id == job_id).values(cloned_from=of))
            original = aliased(RecipeSets)
            key = (
                select(original.source_key)
                .where(
                    original.job_id == of,
                    original.position == RecipeSets.position,
                    original.retry_of.is_(None),
                )
                .scalar_subquery()
            )
            self.conn.execute(
                update(RecipeSets)
                .where(RecipeSets.job_id == job_id)
                .values(source_key=func.coalesce(key, RecipeSets.source_key))
            )

    def clones_of(self, job_id: int) -> list[int]:
        """The jobs cloned from ``job_id``, oldest first."""
        stmt = select(Jobs.id).where(Jobs.cloned_from == job_id).order_by(Jobs.id)
        return list(self.conn.execute(stmt).scalars())
