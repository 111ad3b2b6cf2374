"""Extending a running set's ``max_time`` (Beaker's watchdog-extend, ``labq job extend``).

A set's deadline is ``max_time + extended`` seconds after it took its locks; the
supervisor hears the sum with every heartbeat (:meth:`ExtensionStore.current_max_time`).
Every extension is a guarded UPDATE: the set must still run, and the total stay
within the ceiling.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import select, update

from labq.errors import ConflictError, InputError, NotFoundError
from labq.store.base import Db
from labq.store.tables import Jobs, RecipeSets


class Extended(NamedTuple):
    """A set whose max_time moved: its id, its max_time now and its whole extension."""

    set_id: int
    max_time: int
    extended: int


class ExtensionStore:
    """Moving running sets' deadlines, and telling their supervisors."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def extend_sets(
        self,
        job_id: int,
        by: int,
        *,
        ceiling: int,
        actor: str,
        now: datetime,
        set_id: int | None = None,
    ) -> list[Extended]:
        """Extend the running sets of a job (or only ``set_id``) by ``by`` seconds.

        Refused (nothing changes) when a set's whole extension would pass
        ``ceiling``, when the named set is not the job's, is not running or has no
        max_time, or when the job has no running set with a max_time.
        """
        with self.db.atomic():
            chosen = self._running_sets(job_id, set_id)
            for sid, _, extended in chosen:
                if extended + by > ceiling:
                    raise InputError(
                        f"set {sid} would be extended by {extended + by} s in all, more than"
                        f" the limit of {ceiling} s (limits.max_extend)",
                        place="by",
                    )
            done = []
            for sid, max_time, extended in chosen:
                stmt = (
                    update(RecipeSets)
                    .where(
                        RecipeSets.id == sid,
                        RecipeSets.finished_at.is_(None),
                        RecipeSets.extended == extended,
                    )
                    .values(extended=extended + by)
                )
                if self.conn.execute(stmt).rowcount != 1:
                    raise ConflictError(f"set {sid} ended or was extended meanwhile; try again")
                done.append(Extended(sid, max_time + extended + by, extended + by))
                self.db.log(now, actor, "job", "extend", object_id=job_id, new=f"set {sid} +{by}s")
        return done

    def _running_sets(self, job_id: int, set_id: int | None) -> list[tuple[int, int, int]]:
        """(set, max_time, extended) of the sets an extension applies to."""
        if self.conn.execute(select(Jobs.id).where(Jobs.id == job_id)).first() is None:
            raise NotFoundError(f"no job {job_id}")
        stmt = select(
            RecipeSets.id,
            RecipeSets.max_time,
            RecipeSets.extended,
            RecipeSets.started_at,
            RecipeSets.finished_at,
            RecipeSets.stop_reason,
        ).where(RecipeSets.job_id == job_id)
        if set_id is not None:
            stmt = stmt.where(RecipeSets.id == set_id)
        rows = self.conn.execute(stmt.order_by(RecipeSets.id)).all()
        if set_id is not None:
            if not rows:
                raise NotFoundError(f"job {job_id} has no set {set_id}")
            row = rows[0]
            if row.started_at is None or row.finished_at is not None or row.stop_reason:
                raise ConflictError(f"set {set_id} is not running; only a running set is extended")
            if row.max_time is None:
                raise ConflictError(f"set {set_id} has no max_time to extend")
        running = [
            (r.id, r.max_time, r.extended)
            for r in rows
            if r.started_at is not None
            and r.finished_at is None
            and not r.stop_reason
            and r.max_time is not None
        ]
        if not running:
            raise ConflictError(_nothing_to_extend(job_id, rows))
        return running

    def current_max_time(self, set_id: int) -> int | None:
        """A set's max_time with its extensions (None: it has none, or no such set)."""
        # added here, not in SQL: the sum may pass what an ``integer`` holds
        stmt = select(RecipeSets.max_time, RecipeSets.extended).where(RecipeSets.id == set_id)
        row = self.conn.execute(stmt).one_or_none()
        if row is None or row.max_time is None:
            return None
        return int(row.max_time) + int(row.extended)


def _nothing_to_extend(job_id: int, rows: Sequence[Any]) -> str:
    """Why a job has no set to extend, as plainly as its sets allow."""
    if all(r.finished_at is not None or r.stop_reason for r in rows):
        return f"job {job_id} has ended: nothing to extend"
    if all(r.started_at is None for r in rows):
        return f"job {job_id} has not started: only a running set is extended"
    return f"job {job_id} has no running set with a max_time to extend"
