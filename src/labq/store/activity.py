"""Reading the activity log: who changed what, when, and why."""

from __future__ import annotations

from sqlalchemy import select

from labq.store.base import Db
from labq.store.tables import Activity
from labq.store.views import ActivityEntry


class ActivityStore:
    """The log every part writes to (through :meth:`Db.log`), read back."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def activity(
        self, *, kind: str | None = None, object_id: int | None = None, limit: int = 100
    ) -> list[ActivityEntry]:
        """The newest entries of the activity log, optionally about one kind or object."""
        stmt = select(Activity).order_by(Activity.at.desc(), Activity.id.desc()).limit(limit)
        if kind is not None:
            stmt = stmt.where(Activity.object_kind == kind)
        if object_id is not None:
            stmt = stmt.where(Activity.object_id == object_id)
        return [
            ActivityEntry(
                at=row.at,
                actor=row.actor,
                object_kind=row.object_kind,
                object_id=row.object_id,
                object_name=row.object_name,
                action=row.action,
                old_value=row.old_value,
                new_value=row.new_value,
                reason=row.reason,
            )
            for row in self.conn.execute(stmt)
        ]
