"""People and their credentials: users, groups, memberships, tokens."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from labq.store.tables.schema import (
    Base,
    Name,
    foreign_key,
    id_column,
)


class Users(Base):
    __tablename__ = "users"
    id: Mapped[int] = id_column()
    name: Mapped[str] = mapped_column(Name, unique=True)
    admin: Mapped[bool] = mapped_column(Boolean)
    # ``scrypt$n$r$p$salt$hash``: parameters and salt travel with the digest.
    password_digest: Mapped[str | None] = mapped_column(Text)


class Groups(Base):
    __tablename__ = "groups"
    id: Mapped[int] = id_column()
    name: Mapped[str] = mapped_column(Name, unique=True)


class Memberships(Base):
    __tablename__ = "memberships"
    user_id: Mapped[int] = foreign_key("users.id", cascade=True, primary_key=True)
    group_id: Mapped[int] = foreign_key("groups.id", cascade=True, primary_key=True, index=True)


class Tokens(Base):
    """API tokens: only the SHA-256 digest of the secret is kept, never the secret."""

    __tablename__ = "tokens"
    __table_args__ = (
        # 64 hex digits: a secret (``lq_…``, 46 characters) can never be stored by mistake.
        CheckConstraint("length(digest) = 64", name="digest"),
        CheckConstraint("expires_at IS NULL OR expires_at > created_at", name="expires"),
        CheckConstraint("revoked_at IS NULL OR revoked_at >= created_at", name="revoked"),
    )
    id: Mapped[int] = id_column()
    user_id: Mapped[int] = foreign_key("users.id", cascade=True, index=True)
    name: Mapped[str] = mapped_column(Name)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime]
    last_used_at: Mapped[datetime | None]
    expires_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]
    # A set's own credentials (its supervisor and tasks): valid only while it runs.
    recipe_set_id: Mapped[int | None] = foreign_key("recipe_sets.id", cascade=True, index=True)
