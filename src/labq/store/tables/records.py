"""What is told and kept: the activity log, webhooks, notifications, log prunes."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from sqlalchemy import (
    CheckConstraint,
    ForeignKey,
    Index,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from labq.store.columns import one_of
from labq.store.tables.schema import (
    Base,
    EnumText,
    Name,
    foreign_key,
    id_column,
)


class Activity(Base):
    __tablename__ = "activity"
    __table_args__ = (
        CheckConstraint("object_id IS NOT NULL OR object_name IS NOT NULL", name="object"),
        Index(None, "object_kind", "object_id"),
        Index(None, "at"),
    )
    id: Mapped[int] = id_column()
    at: Mapped[datetime]
    actor: Mapped[str] = mapped_column(Name)
    object_kind: Mapped[str] = mapped_column(String(32))
    object_id: Mapped[int | None]
    object_name: Mapped[str | None] = mapped_column(Name)
    action: Mapped[str] = mapped_column(String(64))
    old_value: Mapped[str | None] = mapped_column(Text)
    new_value: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)


NOTIFICATION_KINDS: Final = ("email", "webhook")
NOTIFICATION_STATES: Final = ("pending", "sent", "failed")


class Webhooks(Base):
    """Where a user's or a group's job ends are POSTed; ``secret`` signs each body (HMAC)."""

    __tablename__ = "webhooks"
    __table_args__ = (CheckConstraint("(user_id IS NULL) <> (group_id IS NULL)", name="one_owner"),)
    id: Mapped[int] = id_column()
    user_id: Mapped[int | None] = foreign_key("users.id", cascade=True, index=True)
    group_id: Mapped[int | None] = foreign_key("groups.id", cascade=True, index=True)
    url: Mapped[str] = mapped_column(Text)
    # kept as it is: an HMAC needs the secret itself; shown to its creator once
    secret: Mapped[str] = mapped_column(String(64))
    created_by: Mapped[str] = mapped_column(Name)
    created_at: Mapped[datetime]


class JobNotices(Base):
    """A job whose end was seen and whose notifications were queued: each job once."""

    __tablename__ = "job_notices"
    job_id: Mapped[int] = foreign_key("jobs.id", cascade=True, primary_key=True)
    state: Mapped[str] = mapped_column(EnumText)
    noticed_at: Mapped[datetime]


class Notifications(Base):
    """The outbox: one email or webhook POST owed for a job's end, until sent or given up."""

    __tablename__ = "notifications"
    __table_args__ = (
        one_of("kind", NOTIFICATION_KINDS),
        one_of("state", NOTIFICATION_STATES),
        CheckConstraint("(state = 'sent') = (sent_at IS NOT NULL)", name="sent"),
        CheckConstraint("attempts >= 0", name="attempts"),
        Index(None, "state", "next_at"),
    )
    id: Mapped[int] = id_column()
    job_id: Mapped[int] = foreign_key("jobs.id", cascade=True, index=True)
    kind: Mapped[str] = mapped_column(EnumText)
    # the webhook it goes to (None for email, or once the webhook was removed)
    webhook_id: Mapped[int | None] = mapped_column(ForeignKey("webhooks.id", ondelete="SET NULL"))
    target: Mapped[str] = mapped_column(Text)  # the URL, or the addresses comma-separated
    payload: Mapped[dict[str, Any]]  # the body, made once so every attempt sends the same
    state: Mapped[str] = mapped_column(EnumText)
    attempts: Mapped[int]
    next_at: Mapped[datetime]
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    sent_at: Mapped[datetime | None]


class LogPrunes(Base):
    """A job whose logs the retention pass deleted, and when."""

    __tablename__ = "log_prunes"
    job_id: Mapped[int] = foreign_key("jobs.id", cascade=True, primary_key=True)
    tag: Mapped[str] = mapped_column(Name)
    deleted_at: Mapped[datetime]
    files: Mapped[int]
    bytes: Mapped[int]
