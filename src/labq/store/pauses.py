"""Paused lab queues: rows of ``lab_pauses``, until resumed or until a time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import delete, func, insert, select

from labq.errors import InputError
from labq.store.base import Db
from labq.store.tables import LabPauses, Labs, Users


@dataclass(frozen=True)
class PauseView:
    """A paused lab queue: since when, until when (None: until resumed), why, by whom."""

    lab: str
    since: datetime
    until: datetime | None
    reason: str | None
    paused_by: str | None


class PauseStore:
    """Pausing and resuming a lab's queue, and pauses that run out."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def pause_queue(
        self,
        lab: str,
        *,
        actor: str,
        now: datetime,
        until: datetime | None = None,
        reason: str | None = None,
    ) -> PauseView:
        """Pause a lab's queue (again: the new end and reason replace the old)."""
        if until is not None and until <= now:
            raise InputError("the pause must end in the future", place="until")
        with self.db.atomic():
            lab_id = self.db.lab_id(lab)
            self.conn.execute(delete(LabPauses).where(LabPauses.lab_id == lab_id))
            self.conn.execute(
                insert(LabPauses).values(
                    lab_id=lab_id,
                    since=now,
                    until=until,
                    reason=reason,
                    paused_by=self.db.user_id(actor),
                )
            )
            self.db.log(now, actor, "lab", "pause", name=lab, new=until, reason=reason)
        return PauseView(lab, now, None if until is None else until.astimezone(UTC), reason, actor)

    def resume_queue(self, lab: str, *, actor: str, now: datetime) -> bool:
        """Resume a lab's queue; False when it was not paused."""
        with self.db.atomic():
            lab_id = self.db.lab_id(lab)
            gone = self.conn.execute(delete(LabPauses).where(LabPauses.lab_id == lab_id))
            if gone.rowcount == 0:
                return False
            self.db.log(now, actor, "lab", "resume", name=lab)
        return True

    def list_pauses(self, *, now: datetime | None = None) -> list[PauseView]:
        """Paused lab queues by lab; with ``now``, only those whose pause has not run out."""
        stmt = (
            select(Labs.name, LabPauses.since, LabPauses.until, LabPauses.reason, Users.name)
            .join(Labs, Labs.id == LabPauses.lab_id)
            .outerjoin(Users, Users.id == LabPauses.paused_by)
            .order_by(Labs.name)
        )
        if now is not None:
            stmt = stmt.where(LabPauses.until.is_(None) | (LabPauses.until > now))
        return [PauseView(*row) for row in self.conn.execute(stmt)]

    def expire_pauses(self, now: datetime) -> list[str]:
        """Remove the pauses that have run out by ``now``; returns their labs."""
        with self.db.atomic():
            rows = self.conn.execute(
                select(LabPauses.lab_id, Labs.name)
                .join(Labs, Labs.id == LabPauses.lab_id)
                .where(LabPauses.until.is_not(None), LabPauses.until <= now)
                .order_by(Labs.name)
            ).all()
            if rows:
                ids = [lab_id for lab_id, _ in rows]
                self.conn.execute(delete(LabPauses).where(LabPauses.lab_id.in_(ids)))
                for _, name in rows:
                    self.db.log(now, "scheduler", "lab", "resume", name=name, reason="pause ended")
        return [name for _, name in rows]

    def next_pause_end(self) -> datetime | None:
        """When the first pause with an end runs out (None: none has one)."""
        found: datetime | None = self.conn.execute(select(func.min(LabPauses.until))).scalar()
        return found

    # --- the parts --------------------------------------------------------------------
