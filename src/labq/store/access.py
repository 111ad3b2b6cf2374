"""Pools, which systems are in them, and the access rules that hang on them (seed 002)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, insert, select, update

from labq.domain.model import AccessPolicy
from labq.domain.priority import Priority
from labq.errors import ConflictError
from labq.store.base import Db
from labq.store.tables import AccessRules, Groups, Pools, SystemPools


class AccessStore:
    """Pools and access rules, stored so that :class:`AccessPolicy` loads back unchanged."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def add_pool(self, name: str, *, actor: str, now: datetime) -> int:
        """Add a pool; it is open to every group until it gets its first rule."""
        with self.db.atomic():
            if self.conn.execute(select(Pools.id).where(Pools.name == name)).first():
                raise ConflictError(f"pool {name!r} already exists")
            stmt = insert(Pools).values(name=name, restricted=False).returning(Pools.id)
            pool_id = self.db.insert_new(stmt, f"pool {name!r} already exists")  # VM pools too
            self.db.log(now, actor, "pool", "add", object_id=pool_id, name=name)
        return pool_id

    def list_pools(self) -> list[str]:
        """Every pool's name, sorted."""
        return list(self.conn.execute(select(Pools.name).order_by(Pools.name)).scalars())

    def add_to_pool(self, fqdn: str, pool: str, *, actor: str, now: datetime) -> bool:
        """Put a system in a pool; False when it already was."""
        with self.db.atomic():
            system_id, pool_id = self.db.system_by_fqdn(fqdn).id, self.db.pool_id(pool)
            there = select(SystemPools.system_id).where(
                SystemPools.system_id == system_id, SystemPools.pool_id == pool_id
            )
            if self.conn.execute(there).first():
                return False
            self.conn.execute(insert(SystemPools).values(system_id=system_id, pool_id=pool_id))
            self.db.log(
                now, actor, "system", "add to pool", object_id=system_id, name=fqdn, new=pool
            )
        return True

    def remove_from_pool(self, fqdn: str, pool: str, *, actor: str, now: datetime) -> bool:
        """Take a system out of a pool; False when it was not in it."""
        with self.db.atomic():
            system_id, pool_id = self.db.system_by_fqdn(fqdn).id, self.db.pool_id(pool)
            stmt = delete(SystemPools).where(
                SystemPools.system_id == system_id, SystemPools.pool_id == pool_id
            )
            if not self.conn.execute(stmt).rowcount:
                return False
            self.db.log(
                now, actor, "system", "remove from pool", object_id=system_id, name=fqdn, old=pool
            )
        return True

    def allow(self, pool: str, group: str, maximum: Priority, *, actor: str, now: datetime) -> None:
        """Let ``group`` run on ``pool`` up to ``maximum`` (replacing its earlier rule there)."""
        with self.db.atomic():
            pool_id, group_id = self.db.pool_id(pool), self.db.group_id(group)
            old = self._rule(pool_id, group_id)
            if old is None:
                self.conn.execute(
                    insert(AccessRules).values(
                        pool_id=pool_id, group_id=group_id, max_priority=maximum.label
                    )
                )
            else:
                self.conn.execute(
                    update(AccessRules)
                    .where(AccessRules.pool_id == pool_id, AccessRules.group_id == group_id)
                    .values(max_priority=maximum.label)
                )
            # From its first rule on, only a pool's rules count (AccessPolicy).
            self.conn.execute(update(Pools).where(Pools.id == pool_id).values(restricted=True))
            self.db.log(
                now,
                actor,
                "pool",
                f"allow {group}",
                object_id=pool_id,
                name=pool,
                old=old,
                new=maximum.label,
            )

    def revoke(self, pool: str, group: str, *, actor: str, now: datetime) -> bool:
        """Remove ``group``'s rule on ``pool``; the pool stays restricted. False if none."""
        with self.db.atomic():
            pool_id, group_id = self.db.pool_id(pool), self.db.group_id(group)
            old = self._rule(pool_id, group_id)
            if old is None:
                return False
            self.conn.execute(
                delete(AccessRules).where(
                    AccessRules.pool_id == pool_id, AccessRules.group_id == group_id
                )
            )
            self.db.log(
                now, actor, "pool", f"revoke {group}", object_id=pool_id, name=pool, old=old
            )
        return True

    def load_access_policy(self) -> AccessPolicy:
        """The access policy, as the scheduler's pure code wants it."""
        policy = AccessPolicy()
        restricted = select(Pools.name).where(Pools.restricted.is_(True))
        for name in self.conn.execute(restricted).scalars():
            policy.rules[name] = {}
        stmt = (
            select(Pools.name, Groups.name, AccessRules.max_priority)
            .join(Pools, Pools.id == AccessRules.pool_id)
            .join(Groups, Groups.id == AccessRules.group_id)
        )
        for pool, group, maximum in self.conn.execute(stmt):
            policy.allow(pool, group, Priority.parse(maximum))
        return policy

    def _rule(self, pool_id: int, group_id: int) -> str | None:
        stmt = select(AccessRules.max_priority).where(
            AccessRules.pool_id == pool_id, AccessRules.group_id == group_id
        )
        return self.conn.execute(stmt).scalar_one_or_none()
