"""The installation's identity and the scheduler's leader epoch (fencing).

A leader is elected outside the database (a PostgreSQL session advisory lock,
or the only server on a SQLite file); once elected it raises the epoch
(:meth:`LeadershipStore.take_leadership`). Every scheduling transaction then
begins with :meth:`LeadershipStore.fence`, an ``UPDATE`` that matches only while
the epoch is still the leader's own. The UPDATE also locks the row until the
transaction ends, so a new leader's raise waits for a deposed leader's last
transaction to commit or roll back, and reads everything it committed: a
deposed leader can finish at most the transaction it was in, never start another.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from sqlalchemy import select, update

from labq.errors import LeadershipLost
from labq.store.base import Db
from labq.store.tables import Installation, Leadership


class Leader(NamedTuple):
    """Who leads the scheduler, since when, under which epoch (0: nobody has yet)."""

    epoch: int
    holder: str | None
    since: datetime | None


class LeadershipStore:
    """The installation id; leader epochs."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def installation_id(self) -> str:
        """The database's own id (made by the migration): what a data directory is marked with."""
        return str(self.conn.execute(select(Installation.uuid)).scalar_one())

    def leader(self) -> Leader:
        """The current epoch and who took it."""
        row = self.conn.execute(select(Leadership.epoch, Leadership.holder, Leadership.since)).one()
        return Leader(row.epoch, row.holder, row.since)

    def take_leadership(self, holder: str, *, now: datetime) -> int:
        """Raise the epoch for a newly elected leader; returns its epoch.

        Waits (on PostgreSQL) for a deposed leader's fenced transaction to end.
        """
        with self.db.atomic():
            self.conn.execute(
                update(Leadership)
                .where(Leadership.id == 1)
                .values(epoch=Leadership.epoch + 1, holder=holder, since=now)
            )
            return int(self.conn.execute(select(Leadership.epoch)).scalar_one())

    def fence(self, epoch: int) -> None:
        """Go on only while ``epoch`` is still the leader's: raises :class:`LeadershipLost`."""
        stmt = (
            update(Leadership)
            .where(Leadership.id == 1, Leadership.epoch == epoch)
            .values(epoch=Leadership.epoch)
        )
        if self.conn.execute(stmt).rowcount != 1:
            now = self.leader()
            raise LeadershipLost(
                f"leader epoch {epoch} is over: epoch {now.epoch} was taken by {now.holder}"
            )
