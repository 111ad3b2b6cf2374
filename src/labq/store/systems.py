"""Labs and systems: condition, usage, and the usage history with its utilisation."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, func, insert, or_, select, update
from sqlalchemy.orm import InstrumentedAttribute

from labq.domain.inventory import Inventory, parse_inventory
from labq.domain.lifecycle import usage_after_condition
from labq.domain.model import System
from labq.domain.states import Condition, Usage, check_usage_move, usage_predecessors
from labq.domain.usage import UsageRecord, utilisation
from labq.errors import ConflictError, IllegalTransition, NotFoundError
from labq.store.base import Db, same
from labq.store.columns import epoch, values_of
from labq.store.tables import FREE_USAGES, Labs, Pools, SystemPools, Systems, UsageHistory, Users


class SystemStore:
    """Labs and systems, with every usage or condition change written to the history."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def add_lab(self, name: str, *, actor: str, now: datetime) -> int:
        """Add a lab (lab controller)."""
        with self.db.atomic():
            if self.conn.execute(select(Labs.id).where(Labs.name == name)).first():
                raise ConflictError(f"lab {name!r} already exists")
            # a leader makes the labs of its VM slots: an admin may be making one too
            stmt = insert(Labs).values(name=name).returning(Labs.id)
            new_id = self.db.insert_new(stmt, f"lab {name!r} already exists")
            self.db.log(now, actor, "lab", "add", object_id=new_id, name=name)
        return new_id

    def list_labs(self) -> list[str]:
        """Every lab's name, sorted."""
        return list(self.conn.execute(select(Labs.name).order_by(Labs.name)).scalars())

    def add_system(self, system: System, *, actor: str, now: datetime) -> int:
        """Add a system as ``Ledger.add_system`` does: idle, then pending if automated.

        Its lab, owner and pools must exist already.
        """
        with self.db.atomic():
            if self.conn.execute(select(Systems.id).where(Systems.fqdn == system.fqdn)).first():
                raise ConflictError(f"system {system.fqdn} already exists")
            new_id = self.conn.execute(
                insert(Systems)
                .values(
                    fqdn=system.fqdn,
                    lab_id=self.db.lab_id(system.lab),
                    arch=system.arch,
                    owner_id=None if system.owner is None else self.db.user_id(system.owner),
                    attributes=dict(system.attributes),
                    inventory=system.inventory.to_json(),
                    condition=system.condition.value,
                    usage=Usage.IDLE.value,
                )
                .returning(Systems.id)
            ).scalar_one()
            for pool in sorted(system.pools):
                self.conn.execute(
                    insert(SystemPools).values(system_id=new_id, pool_id=self.db.pool_id(pool))
                )
            self.db.record(self.db.system_by_fqdn(system.fqdn), now, first=True)
            if system.condition is Condition.AUTOMATED:
                self.set_usage(system.fqdn, Usage.PENDING, now=now)
            self.db.log(now, actor, "system", "add", object_id=new_id, name=system.fqdn)
        return new_id

    def get_system(self, fqdn: str) -> System:
        """One system as the domain sees it."""
        found = self.load_systems(Systems.fqdn == fqdn)
        if not found:
            raise NotFoundError(f"no system named {fqdn!r}")
        return found[0]

    def list_systems(self, *, lab: str | None = None, pool: str | None = None) -> list[System]:
        """Systems sorted by fqdn, optionally only one lab's or one pool's."""
        where: list[ColumnElement[bool]] = []
        if lab is not None:
            where.append(Systems.lab_id == self.db.lab_id(lab))
        if pool is not None:
            members = select(SystemPools.system_id).where(
                SystemPools.pool_id == self.db.pool_id(pool)
            )
            where.append(Systems.id.in_(members))
        return self.load_systems(*where)

    def set_inventory(self, fqdn: str, inventory: Inventory, *, actor: str, now: datetime) -> bool:
        """Replace a system's inventory; False when it was that already."""
        with self.db.atomic():
            seen = self.get_system(fqdn)
            if seen.inventory == inventory:
                return False
            self.conn.execute(
                update(Systems).where(Systems.fqdn == fqdn).values(inventory=inventory.to_json())
            )
            self.db.log(now, actor, "system", "inventory", name=fqdn)
        return True

    def condition_reason(self, fqdn: str) -> str | None:
        """Why the system's condition was last set, as its admin said."""
        self.db.system_by_fqdn(fqdn)
        stmt = select(Systems.condition_reason).where(Systems.fqdn == fqdn)
        return self.conn.execute(stmt).scalar_one()

    def set_condition(
        self,
        fqdn: str,
        condition: Condition,
        *,
        now: datetime,
        actor: str,
        reason: str | None = None,
    ) -> bool:
        """Change a system's condition; its usage follows (``usage_after_condition``).

        Made automated again, it starts a fresh count of consecutive aborts.
        Returns False when the system already has that condition.
        """
        with self.db.atomic():
            seen = self.db.system_by_fqdn(fqdn)
            if seen.condition is condition:
                return False
            target = usage_after_condition(condition, seen.usage, seen.recipe_id is not None)
            check_usage_move(seen.usage, target)
            guard = [
                Systems.condition == seen.condition.value,
                Systems.usage == seen.usage.value,
                same(Systems.recipe_id, seen.recipe_id),
            ]
            fresh = {"consecutive_aborts": 0} if condition is Condition.AUTOMATED else {}
            self.db.move_system(
                seen,
                now,
                guard,
                condition=condition.value,
                condition_reason=reason,
                usage=target.value,
                **fresh,
            )
            self.db.log(
                now,
                actor,
                "system",
                "condition",
                object_id=seen.id,
                name=fqdn,
                old=seen.condition.value,
                new=condition.value,
                reason=reason,
            )
        return True

    def consecutive_aborts(self, fqdn: str) -> int:
        """Sets aborted on the system in a row since one completed there (or it was fixed).

        A move counts it: aborted after the set started there adds one, completed
        clears it. Marking the system broken past a limit is the caller's job.
        """
        self.db.system_by_fqdn(fqdn)
        stmt = select(Systems.consecutive_aborts).where(Systems.fqdn == fqdn)
        return self.conn.execute(stmt).scalar_one()

    def set_usage(self, fqdn: str, usage: Usage, *, now: datetime) -> bool:
        """Move a free system between idle and pending; held systems move with their recipe.

        Returns False when it already is in ``usage``.
        """
        if usage.value not in FREE_USAGES:
            raise IllegalTransition(f"{fqdn}: {usage.value} comes only with a recipe")
        with self.db.atomic():
            seen = self.db.system_by_fqdn(fqdn)
            if seen.recipe_id is not None and usage is not seen.usage:
                raise IllegalTransition(
                    f"{fqdn} is held by recipe {seen.recipe_id}: move the recipe"
                )
            if not check_usage_move(seen.usage, usage):
                return False
            guard = [
                Systems.usage.in_(values_of(usage_predecessors(usage))),
                Systems.recipe_id.is_(None),
            ]
            self.db.move_system(seen, now, guard, usage=usage.value)
        return True

    def usage_history(self, fqdn: str) -> list[UsageRecord]:
        """Every history row of one system, oldest first."""
        return self._history(Systems.id == self.db.system_by_fqdn(fqdn).id)

    def utilisation(
        self,
        *,
        start: datetime,
        end: datetime,
        fqdn: str | None = None,
        pool: str | None = None,
        now: datetime | None = None,
    ) -> float:
        """The busy share of recorded time in ``[start, end)`` of one system, a pool, or all.

        A pool counts its current members. Open rows count up to ``now`` (or ``end``).
        """
        where: list[ColumnElement[bool]] = []
        if fqdn is not None:
            where.append(Systems.id == self.db.system_by_fqdn(fqdn).id)
        if pool is not None:
            members = select(SystemPools.system_id).where(
                SystemPools.pool_id == self.db.pool_id(pool)
            )
            where.append(Systems.id.in_(members))
        rows = self._usage_between(start, end, *where)
        return utilisation(rows, epoch(start), epoch(end), now=None if now is None else epoch(now))

    def usage_between(
        self, start: datetime, end: datetime, fqdns: Sequence[str] | None = None
    ) -> list[UsageRecord]:
        """History rows of every system (or of ``fqdns``) that overlap ``[start, end)``."""
        where = [] if fqdns is None else [Systems.fqdn.in_(list(fqdns))]
        return self._usage_between(start, end, *where)

    def _usage_between(
        self, start: datetime, end: datetime, *where: ColumnElement[bool]
    ) -> list[UsageRecord]:
        return self._history(
            UsageHistory.started_at < end,
            or_(UsageHistory.ended_at.is_(None), UsageHistory.ended_at > start),
            *where,
        )

    def _history(self, *where: ColumnElement[bool]) -> list[UsageRecord]:
        stmt = (
            select(
                Systems.fqdn,
                UsageHistory.usage,
                UsageHistory.condition,
                UsageHistory.recipe_id,
                UsageHistory.started_at,
                UsageHistory.ended_at,
            )
            .join(Systems, Systems.id == UsageHistory.system_id)
            .where(*where)
            .order_by(UsageHistory.system_id, UsageHistory.started_at, UsageHistory.id)
        )
        return [
            UsageRecord(
                fqdn,
                Usage(usage),
                Condition(condition),
                recipe,
                epoch(started),
                None if ended is None else epoch(ended),
            )
            for fqdn, usage, condition, recipe, started, ended in self.conn.execute(stmt)
        ]

    def load_systems(
        self, *where: ColumnElement[bool], order: InstrumentedAttribute[Any] = Systems.fqdn
    ) -> list[System]:
        added = (  # its first usage row: written when it was added
            select(func.min(UsageHistory.started_at))
            .where(UsageHistory.system_id == Systems.id)
            .scalar_subquery()
        )
        stmt = (
            select(
                Systems.id,
                Systems.fqdn,
                added.label("added"),
                Labs.name.label("lab"),
                Systems.arch,
                Systems.attributes,
                Systems.inventory,
                Users.name.label("owner"),
                Systems.condition,
                Systems.usage,
                Systems.recipe_id,
            )
            .join(Labs, Labs.id == Systems.lab_id)
            .outerjoin(Users, Users.id == Systems.owner_id)
            .where(*where)
            .order_by(order)
        )
        rows = self.conn.execute(stmt).all()
        pools = self._pools_of([row.id for row in rows])
        return [
            System(
                fqdn=row.fqdn,
                lab=row.lab,
                arch=row.arch,
                attributes=dict(row.attributes),
                inventory=parse_inventory(row.inventory),
                pools=frozenset(pools.get(row.id, ())),
                owner=row.owner,
                condition=Condition(row.condition),
                usage=Usage(row.usage),
                recipe=row.recipe_id,
                added=None if row.added is None else _utc_text(row.added),
            )
            for row in rows
        ]

    def _pools_of(self, system_ids: list[int]) -> dict[int, list[str]]:
        out: dict[int, list[str]] = defaultdict(list)
        if not system_ids:
            return out
        stmt = (
            select(SystemPools.system_id, Pools.name)
            .join(Pools, Pools.id == SystemPools.pool_id)
            .where(SystemPools.system_id.in_(system_ids))
        )
        for system_id, name in self.conn.execute(stmt):
            out[system_id].append(name)
        return out


def _utc_text(moment: datetime) -> str:
    """A stored time as facts hold it: ``YYYY-MM-DDTHH:MM:SSZ``."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
