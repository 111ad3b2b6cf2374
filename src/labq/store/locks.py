"""The lock service's storage: held locks and waiters, changed under one lock.

Every operation loads the lock rows into a :class:`~labq.domain.locktable.LockTable`,
applies the domain's rules there and writes back what changed, so the rules
live in one place. Operations wait for one another: SQLite's transactions take
the write lock when they begin; on PostgreSQL a transaction-level advisory lock
is taken first. A waiter that has not asked again for ``WAITER_TTL`` (its
supervisor or task died) is dropped, so it cannot block the queue for ever.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from sqlalchemy import delete, insert, select, text, update

from labq.domain.locks import WHOLE_LAB
from labq.domain.locktable import Blocker, Grant, LockTable, Outcome, Request
from labq.errors import ConflictError, NotFoundError
from labq.store.base import Db
from labq.store.columns import epoch, from_epoch
from labq.store.tables import Labs, LockGrants, LockWaiters, RecipeSets

WAITER_TTL: Final = timedelta(seconds=60)
_PG_LOCKS_KEY: Final = 0x6C616271_6C6B  # "labq" "lk": the lock service's advisory lock


@dataclass(frozen=True)
class LockWait:
    """A set waiting for locks: what it asked for, since when, and what stands in its way."""

    set_id: int
    grants: tuple[Grant, ...]
    since: datetime
    blockers: tuple[Blocker, ...]


class LockStore:
    """Acquiring and releasing locks for running recipe sets; who holds and who waits."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def acquire_locks(
        self,
        set_id: int,
        grants: Sequence[Grant],
        *,
        now: datetime,
        wait: bool = True,
        lab_lock: bool = False,
    ) -> Outcome:
        """All of ``grants`` for the set, or none: granted, waiting (queued) or refused.

        With ``lab_lock`` the set's lab's whole-lab lock comes with them, shared
        (unless they name it), so a set holding the whole lab excludes the others.
        Asking again while waiting keeps the request's place and keeps it alive.
        """
        with self.db.atomic():
            lab = self._running_lab(set_id)
            asked = _with_lab_lock(grants, lab) if lab_lock else list(grants)
            with self._changing(now) as table:
                outcome = table.acquire(set_id, asked, epoch(now), wait=wait)
            if not outcome.granted and wait and outcome.refused is None:
                self._seen(set_id, tuple(sorted(set(asked))), now)
            return outcome

    def release_locks(
        self, set_id: int, grants: Iterable[Grant] | None = None, *, now: datetime
    ) -> list[int]:
        """Let go of some of a set's locks (all, and its waits, when None); the sets served."""
        with self._changing(now) as table:
            served = table.release(set_id, None if grants is None else list(grants))
        return sorted({r.owner for r in served})

    def held_locks(self, set_ids: Iterable[int] | None = None) -> dict[int, tuple[Grant, ...]]:
        """The locks each set holds (every set with one, or only ``set_ids``)."""
        stmt = select(LockGrants).order_by(LockGrants.id)
        if set_ids is not None:
            stmt = stmt.where(LockGrants.recipe_set_id.in_(list(set_ids)))
        out: dict[int, list[Grant]] = {}
        for row in self.conn.execute(stmt):
            out.setdefault(row.recipe_set_id, []).append(_grant(row))
        return {set_id: tuple(sorted(grants)) for set_id, grants in out.items()}

    def lock_waits(self, *, now: datetime) -> list[LockWait]:
        """Sets waiting for locks, first come first, with what blocks each (stale ones left out)."""
        table = self._load(now, drop_stale=False)
        return [
            LockWait(r.owner, r.grants, from_epoch(r.since), table.waiting_on(r.owner))
            for r in table.waiters
        ]

    def release_ended_locks(self, *, now: datetime) -> list[int]:
        """Locks and waits of sets that have ended (a safety net); the sets served."""
        with self._changing(now) as table:
            owners = set(table.held) | {w.owner for w in table.waiters}
            ended = set(
                self.conn.scalars(
                    select(RecipeSets.id).where(
                        RecipeSets.id.in_(owners), RecipeSets.finished_at.is_not(None)
                    )
                )
            )
            served = {r.owner for owner in sorted(ended) for r in table.release(owner)}
        return sorted(served - ended)

    # --- the parts -----------------------------------------------------------------

    @contextmanager
    def _changing(self, now: datetime) -> Iterator[LockTable]:
        """The lock table, loaded under the service's lock; what changes in it is written back."""
        with self.db.atomic():
            if self.conn.dialect.name == "postgresql":
                self.conn.execute(text(f"SELECT pg_advisory_xact_lock({_PG_LOCKS_KEY})"))
            table = self._load(now)
            before = _snapshot(table)
            yield table
            self._write(table, before, now)

    def _running_lab(self, set_id: int) -> str:
        row = self.conn.execute(
            select(RecipeSets.started_at, RecipeSets.finished_at, Labs.name)
            .outerjoin(Labs, Labs.id == RecipeSets.lab_id)
            .where(RecipeSets.id == set_id)
        ).one_or_none()
        if row is None:
            raise NotFoundError(f"no recipe set {set_id}")
        if row.started_at is None or row.finished_at is not None:
            raise ConflictError(f"recipe set {set_id} is not running: only running sets take locks")
        return str(row.name)

    def _load(self, now: datetime, *, drop_stale: bool = True) -> LockTable:
        if drop_stale:
            self.conn.execute(delete(LockWaiters).where(LockWaiters.seen_at < now - WAITER_TTL))
        table = LockTable()
        for row in self.conn.execute(select(LockGrants)):
            table.held.setdefault(row.recipe_set_id, set()).add(_grant(row))
        for waiter in self.conn.execute(select(LockWaiters).order_by(LockWaiters.id)):
            table.waiters.append(
                Request(
                    waiter.recipe_set_id, _grants(waiter.grants), epoch(waiter.since), waiter.id
                )
            )
        return table

    def _seen(self, set_id: int, grants: tuple[Grant, ...], now: datetime) -> None:
        """The set asked again for ``grants``: its waiting request stays alive."""
        rows = self.conn.execute(
            select(LockWaiters.id, LockWaiters.grants).where(LockWaiters.recipe_set_id == set_id)
        )
        ids = [row.id for row in rows if _grants(row.grants) == grants]
        if ids:
            self.conn.execute(
                update(LockWaiters).where(LockWaiters.id.in_(ids)).values(seen_at=now)
            )

    def _write(self, table: LockTable, before: _Snapshot, now: datetime) -> None:
        """Write back the difference between ``before`` and the table now."""
        held_before, waiting_before = before
        held_after, waiting_after = _snapshot(table)
        for owner, grant in held_before - held_after:
            self.conn.execute(
                delete(LockGrants).where(
                    LockGrants.recipe_set_id == owner,
                    LockGrants.level == grant.level,
                    LockGrants.name == grant.name,
                    LockGrants.exclusive == grant.exclusive,
                )
            )
        for owner, grant in sorted(held_after - held_before):
            self.conn.execute(
                insert(LockGrants).values(
                    recipe_set_id=owner,
                    level=grant.level,
                    name=grant.name,
                    exclusive=grant.exclusive,
                    acquired_at=now,
                )
            )
        for key, ref in waiting_before.items():
            if key not in waiting_after and ref is not None:  # served or dropped
                self.conn.execute(delete(LockWaiters).where(LockWaiters.id == ref))
        for owner, grants in waiting_after.keys() - waiting_before.keys():
            self.conn.execute(
                insert(LockWaiters).values(
                    recipe_set_id=owner,
                    grants=[[g.level, g.name, g.exclusive] for g in grants],
                    since=now,
                    seen_at=now,
                )
            )


# held (owner, lock) pairs; waiting requests by (owner, locks) -> row id (None: not stored yet)
_Snapshot = tuple[set[tuple[int, Grant]], dict[tuple[int, tuple[Grant, ...]], int | None]]


def _snapshot(table: LockTable) -> _Snapshot:
    held = {(owner, grant) for owner, grants in table.held.items() for grant in grants}
    return held, {(r.owner, r.grants): r.ref for r in table.waiters}


def _with_lab_lock(grants: Sequence[Grant], lab: str) -> list[Grant]:
    if any(g.level == WHOLE_LAB and g.name == lab for g in grants):
        return list(grants)
    return [*grants, Grant(WHOLE_LAB, lab)]


def _grants(stored: Any) -> tuple[Grant, ...]:
    return tuple(sorted(Grant(str(g[0]), str(g[1]), bool(g[2])) for g in stored))


def _grant(row: Any) -> Grant:
    return Grant(row.level, row.name, row.exclusive)
