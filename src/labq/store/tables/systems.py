"""Labs, their systems, pools and access rules, the usage history and reservations."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from labq.domain.states import Condition, Usage
from labq.store.columns import one_of, values_of
from labq.store.tables.schema import (
    FREE,
    PRIORITIES,
    Base,
    EnumText,
    Name,
    foreign_key,
    id_column,
)


class Labs(Base):
    __tablename__ = "labs"
    id: Mapped[int] = id_column()
    name: Mapped[str] = mapped_column(Name, unique=True)


class Pools(Base):
    __tablename__ = "pools"
    id: Mapped[int] = id_column()
    name: Mapped[str] = mapped_column(Name, unique=True)
    # Once a pool has had an access rule it stays restricted (AccessPolicy's rule).
    restricted: Mapped[bool] = mapped_column(Boolean)


class Systems(Base):
    __tablename__ = "systems"
    __table_args__ = (
        one_of("condition", values_of(Condition)),
        one_of("usage", values_of(Usage)),
        # A system is busy exactly when a recipe holds it.
        CheckConstraint(
            f"(recipe_id IS NULL AND usage IN {FREE})"
            f" OR (recipe_id IS NOT NULL AND usage NOT IN {FREE})",
            name="busy_iff_held",
        ),
        CheckConstraint("consecutive_aborts >= 0", name="consecutive_aborts"),
        Index(None, "lab_id", "usage"),
    )
    id: Mapped[int] = id_column()
    fqdn: Mapped[str] = mapped_column(Name, unique=True)
    lab_id: Mapped[int] = foreign_key("labs.id")
    arch: Mapped[str] = mapped_column(String(64))
    owner_id: Mapped[int | None] = foreign_key("users.id")
    attributes: Mapped[dict[str, Any]]
    # devices, disks, cpu flags, last_inventoried (labq.domain.inventory); {} = never
    inventory: Mapped[dict[str, Any]] = mapped_column(server_default=text("'{}'"))
    condition: Mapped[str] = mapped_column(EnumText)
    condition_reason: Mapped[str | None] = mapped_column(Text)
    usage: Mapped[str] = mapped_column(EnumText)
    # systems ↔ recipes is a cycle; use_alter lets metadata sort the tables.
    recipe_id: Mapped[int | None] = mapped_column(
        ForeignKey("recipes.id", use_alter=True), unique=True
    )
    # Sets aborted on it in a row since one completed (issue 4's health rule).
    consecutive_aborts: Mapped[int] = mapped_column(Integer, server_default=text("0"))


class SystemPools(Base):
    __tablename__ = "system_pools"
    system_id: Mapped[int] = foreign_key("systems.id", cascade=True, primary_key=True)
    pool_id: Mapped[int] = foreign_key("pools.id", cascade=True, primary_key=True, index=True)


class AccessRules(Base):
    __tablename__ = "access_rules"
    __table_args__ = (
        UniqueConstraint("pool_id", "group_id"),
        one_of("max_priority", PRIORITIES),
    )
    id: Mapped[int] = id_column()
    pool_id: Mapped[int] = foreign_key("pools.id", cascade=True)
    group_id: Mapped[int] = foreign_key("groups.id", cascade=True, index=True)
    max_priority: Mapped[str] = mapped_column(EnumText)


class UsageHistory(Base):
    __tablename__ = "usage_history"
    __table_args__ = (
        one_of("usage", values_of(Usage)),
        one_of("condition", values_of(Condition)),
        CheckConstraint("ended_at IS NULL OR ended_at >= started_at", name="ends_after_start"),
        Index(None, "system_id", "started_at"),
        # One open row per system; partial unique indexes work on SQLite and PostgreSQL.
        Index(
            "uq_usage_history_open",
            "system_id",
            unique=True,
            sqlite_where=text("ended_at IS NULL"),
            postgresql_where=text("ended_at IS NULL"),
        ),
    )
    id: Mapped[int] = id_column()
    system_id: Mapped[int] = foreign_key("systems.id", cascade=True)
    usage: Mapped[str] = mapped_column(EnumText)
    condition: Mapped[str] = mapped_column(EnumText)
    recipe_id: Mapped[int | None] = mapped_column(ForeignKey("recipes.id", ondelete="SET NULL"))
    started_at: Mapped[datetime]
    ended_at: Mapped[datetime | None]


class SystemReservations(Base):
    """A system reserved or loaned to a person (issue 14): not offered to the queue while open.

    ``kind`` is ``reserve`` (a recipe's ``<reservesys>`` or ``labq system reserve``, whose
    recipe is ``recipe_id``) or ``loan`` (an admin's). Open while ``released_at`` is NULL
    and ``until`` (None: no end) has not passed; at most one open per system.
    """

    __tablename__ = "system_reservations"
    __table_args__ = (
        one_of("kind", ("reserve", "loan")),
        CheckConstraint("until IS NULL OR until > since", name="until"),
        CheckConstraint("released_at IS NULL OR released_at >= since", name="released"),
        Index(
            "uq_system_reservations_open",
            "system_id",
            unique=True,
            sqlite_where=text("released_at IS NULL"),
            postgresql_where=text("released_at IS NULL"),
        ),
    )
    id: Mapped[int] = id_column()
    system_id: Mapped[int] = foreign_key("systems.id", cascade=True, index=True)
    holder_id: Mapped[int] = foreign_key("users.id")
    kind: Mapped[str] = mapped_column(String(16))
    recipe_id: Mapped[int | None] = mapped_column(ForeignKey("recipes.id", ondelete="SET NULL"))
    since: Mapped[datetime]
    until: Mapped[datetime | None]
    released_at: Mapped[datetime | None]
    released_by: Mapped[int | None] = foreign_key("users.id")
    reason: Mapped[str | None] = mapped_column(Text)


class DistroTrees(Base):
    """A lab's catalogue: trees (from a ``.treeinfo``) and images it can install, per arch."""

    __tablename__ = "distro_trees"
    __table_args__ = (
        UniqueConstraint("lab_id", "name", "arch"),
        CheckConstraint("kind IN ('tree', 'image')", name="kind"),
    )
    id: Mapped[int] = id_column()
    lab_id: Mapped[int] = foreign_key("labs.id", cascade=True)
    name: Mapped[str] = mapped_column(Name)
    arch: Mapped[str] = mapped_column(String(64))
    family: Mapped[str] = mapped_column(Name)
    version: Mapped[str] = mapped_column(String(64))
    variant: Mapped[str] = mapped_column(Name)
    kind: Mapped[str] = mapped_column(EnumText)
    url: Mapped[str] = mapped_column(Text)
    kernel: Mapped[str] = mapped_column(Text)
    initrd: Mapped[str] = mapped_column(Text)
    repos: Mapped[list[Any]]  # [[name, url], …]
    tags: Mapped[list[Any]]
    machine_types: Mapped[list[Any]]
    os_type: Mapped[str] = mapped_column(String(64))
    os_version: Mapped[str] = mapped_column(String(64))
    added_at: Mapped[datetime]
