"""How the lab is run: agents, locks, leadership, admission filters and paused queues."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from labq.store.columns import one_of
from labq.store.tables.schema import (
    Base,
    Name,
    foreign_key,
    id_column,
)


class Agents(Base):
    """Lab agents: a token (its SHA-256 digest) bound to labs, and what the agent last said."""

    __tablename__ = "agents"
    __table_args__ = (CheckConstraint("length(digest) = 64", name="digest"),)
    id: Mapped[int] = id_column()
    name: Mapped[str] = mapped_column(Name, unique=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    labs: Mapped[list[Any]]
    created_at: Mapped[datetime]
    revoked_at: Mapped[datetime | None]
    version: Mapped[str | None] = mapped_column(Name)
    host: Mapped[str | None] = mapped_column(Name)
    max_sets: Mapped[int | None]
    running: Mapped[int] = mapped_column(server_default="0")
    last_seen_at: Mapped[datetime | None]


class LockGrants(Base):
    """A lock a running set holds: ``name`` on ``level`` (``*``: every name), shared or not."""

    __tablename__ = "lock_grants"
    __table_args__ = (
        UniqueConstraint("recipe_set_id", "level", "name", "exclusive"),
        Index(None, "level", "name"),
    )
    id: Mapped[int] = id_column()
    recipe_set_id: Mapped[int] = foreign_key("recipe_sets.id", cascade=True)
    level: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(Name)
    exclusive: Mapped[bool] = mapped_column(Boolean)
    acquired_at: Mapped[datetime]


class LockWaiters(Base):
    """A request waiting for locks, first come first served by ``id`` (a set may have several)."""

    __tablename__ = "lock_waiters"
    id: Mapped[int] = id_column()
    recipe_set_id: Mapped[int] = foreign_key("recipe_sets.id", cascade=True, index=True)
    grants: Mapped[list[Any]]  # [[level, name, exclusive], …]
    since: Mapped[datetime]
    seen_at: Mapped[datetime]  # the last time the waiter asked; stale waiters are dropped


class Installation(Base):
    """Who this database is: one row, made by the migration. Everything a server keeps on disk
    for it lives in a data directory marked with this id (``labq.store.installation``)."""

    __tablename__ = "installation"
    __table_args__ = (CheckConstraint("id = 1", name="one_row"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    created_at: Mapped[datetime]


class Leadership(Base):
    """The scheduler's leader epoch (one row). Each new leader raises it; every scheduling
    transaction first checks that it is still its own, so a deposed leader cannot write."""

    __tablename__ = "leadership"
    __table_args__ = (CheckConstraint("id = 1", name="one_row"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    epoch: Mapped[int]
    holder: Mapped[str | None] = mapped_column(Name)
    since: Mapped[datetime | None]


FILTER_ACTIONS: Final = ("accept", "continue", "pause", "reject", "rate-limit")


class Filters(Base):
    """Queue filter rules (Ganeti's job filters), tried in ``(priority, id)`` order."""

    __tablename__ = "filters"
    __table_args__ = (
        one_of("action", FILTER_ACTIONS),
        CheckConstraint(
            "(action = 'rate-limit' AND rate IS NOT NULL AND rate > 0)"
            " OR (action <> 'rate-limit' AND rate IS NULL)",
            name="rate",
        ),
        CheckConstraint("priority >= 0", name="priority"),
    )
    id: Mapped[int] = id_column()
    priority: Mapped[int]
    action: Mapped[str] = mapped_column(String(16))
    rate: Mapped[int | None]
    predicates: Mapped[list[Any]]
    comment: Mapped[str | None] = mapped_column(Text)
    created_by: Mapped[int | None] = foreign_key("users.id")
    created_at: Mapped[datetime]


class LabPauses(Base):
    """A lab whose queue is paused: nothing new starts there until resumed or ``until``."""

    __tablename__ = "lab_pauses"
    __table_args__ = (CheckConstraint("until IS NULL OR until > since", name="until"),)
    lab_id: Mapped[int] = foreign_key("labs.id", cascade=True, primary_key=True)
    since: Mapped[datetime]
    until: Mapped[datetime | None]
    reason: Mapped[str | None] = mapped_column(Text)
    paused_by: Mapped[int | None] = foreign_key("users.id")
