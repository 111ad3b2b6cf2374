"""What every part of the repository shares: the connection, lookups, history, activity."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, Connection, Row, case, insert, literal, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import InstrumentedAttribute
from sqlalchemy.sql.dml import ReturningInsert

from labq.domain.states import Condition, Usage
from labq.errors import ConflictError, NotFoundError
from labq.store.columns import UTCDateTime
from labq.store.tables import Activity, Groups, Labs, Pools, Systems, UsageHistory, Users

Named = Labs | Users | Groups | Pools
_KINDS: dict[type[Named], str] = {Labs: "lab", Users: "user", Groups: "group", Pools: "pool"}


class SystemState(NamedTuple):
    """The columns of a system that its state machines read."""

    id: int
    fqdn: str
    usage: Usage
    condition: Condition
    recipe_id: int | None


class Db:
    """The connection the parts of one repository share; the caller owns the transaction.

    Every public method of a part that writes runs inside :meth:`atomic`, so a
    method that raises leaves nothing behind, even if the caller goes on and
    commits. Besides, what every part needs: lookups by name, the guarded move of
    a system with its history row, and the activity log.
    """

    def __init__(self, conn: Connection, *, savepoints: bool = True) -> None:
        self.conn = conn
        self.savepoints = savepoints

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """One all-or-nothing step: a SAVEPOINT inside the caller's transaction.

        A caller that never goes on after an error (the scheduler: any error rolls
        its whole event back) opens the repository without savepoints, and saves
        their round trips.
        """
        if not self.savepoints:
            yield
            return
        with self.conn.begin_nested():
            yield

    def insert_new(self, stmt: ReturningInsert[int], taken: str) -> int:
        """Insert one row under a unique name; its id. Another transaction may have made
        the same name since the caller looked (PostgreSQL: this insert then waits on the
        unique index and fails): that is :class:`ConflictError` ``taken``, not a 500."""
        try:
            with self.conn.begin_nested():
                made: int = self.conn.execute(stmt).scalar_one()
        except IntegrityError:
            raise ConflictError(taken) from None
        return made

    # --- lookups by name -------------------------------------------------------

    def id_of(self, table: type[Named], name: str) -> int:
        found = self.conn.execute(select(table.id).where(table.name == name)).scalar_one_or_none()
        if found is None:
            raise NotFoundError(f"no {_KINDS[table]} named {name!r}")
        return found

    def lab_id(self, name: str) -> int:
        return self.id_of(Labs, name)

    def user_id(self, name: str) -> int:
        return self.id_of(Users, name)

    def group_id(self, name: str) -> int:
        return self.id_of(Groups, name)

    def pool_id(self, name: str) -> int:
        return self.id_of(Pools, name)

    def system_state(self, *where: ColumnElement[bool]) -> SystemState:
        row = self.conn.execute(select(*_STATE_COLUMNS).where(*where)).one_or_none()
        if row is None:
            raise NotFoundError("no such system")
        return _state(row)

    def system_by_fqdn(self, fqdn: str) -> SystemState:
        try:
            return self.system_state(Systems.fqdn == fqdn)
        except NotFoundError:
            raise NotFoundError(f"no system named {fqdn!r}") from None

    # --- guarded updates and the usage history -----------------------------------

    def move_system(
        self, seen: SystemState, now: datetime, guard: Iterable[ColumnElement[bool]], **values: Any
    ) -> SystemState:
        """A guarded UPDATE of one system, then its history row.

        ``guard`` says what must still hold for the change to be right; when it
        no longer does, someone changed the system since ``seen`` was read.
        """
        stmt = (
            update(Systems)
            .where(Systems.id == seen.id, *guard)
            .values(**values)
            .returning(*_STATE_COLUMNS)
        )
        rows = self.conn.execute(stmt).all()
        if len(rows) != 1:
            raise ConflictError(f"system {seen.fqdn} changed under us; nothing was moved")
        after = _state(rows[0])
        self.record(after, now)
        return after

    def record(self, system: SystemState, now: datetime, *, first: bool = False) -> None:
        """Close the system's open history row and open one for its state."""
        start = now if first else self._close_open_row(system, now)
        self.conn.execute(
            insert(UsageHistory).values(
                system_id=system.id,
                usage=system.usage.value,
                condition=system.condition.value,
                recipe_id=system.recipe_id,
                started_at=start,
            )
        )

    def _close_open_row(self, system: SystemState, now: datetime) -> datetime:
        """End the open row at ``now``, or at its own start if ``now`` is before it.

        The guarded update of the system has already put this change after the
        one that opened the row, whatever the clocks say: two changes may share a
        clock tick, and another process's clock may be a little ahead of ours.
        So history never goes back; a change that seems to does so at once.
        """
        ended = case(
            (UsageHistory.started_at > now, UsageHistory.started_at),
            else_=literal(now, UTCDateTime()),
        )
        closed = self.conn.execute(
            update(UsageHistory)
            .where(UsageHistory.system_id == system.id, UsageHistory.ended_at.is_(None))
            .values(ended_at=ended)
            .returning(UsageHistory.ended_at)
        ).all()
        ends = [end for (end,) in closed if end is not None]
        if len(ends) != 1:
            raise ValueError(f"{system.fqdn}: {len(closed)} open history rows, not one")
        return ends[0]

    # --- the activity log ------------------------------------------------------

    def log(
        self,
        now: datetime,
        actor: str,
        kind: str,
        action: str,
        *,
        object_id: int | None = None,
        name: str | None = None,
        old: object = None,
        new: object = None,
        reason: str | None = None,
    ) -> None:
        self.conn.execute(
            insert(Activity).values(
                at=now,
                actor=actor,
                object_kind=kind,
                object_id=object_id,
                object_name=name,
                action=action,
                old_value=None if old is None else str(old),
                new_value=None if new is None else str(new),
                reason=reason,
            )
        )


_STATE_COLUMNS = (Systems.id, Systems.fqdn, Systems.usage, Systems.condition, Systems.recipe_id)


def _state(row: Row[int, str, str, str, int | None]) -> SystemState:
    system_id, fqdn, usage, condition, recipe_id = row
    return SystemState(system_id, fqdn, Usage(usage), Condition(condition), recipe_id)


def same(column: InstrumentedAttribute[int | None], value: int | None) -> ColumnElement[bool]:
    """``column = value`` that also matches NULL to None (SQL's ``=`` does not)."""
    return column.is_(None) if value is None else column == value
