"""Job-end notifications: webhooks, the pass that notices ended jobs, and the outbox.

The notice pass runs in the server's sender thread, never in the scheduler's: it finds
jobs that have ended and were not noticed yet, and in one transaction marks each
noticed and queues its emails and webhook POSTs. The sender then takes due rows, sends
outside any transaction, and marks each sent or failed. A job is noticed once (its
``job_notices`` row is its key), and a row marked sent is never sent again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, exists, insert, or_, select, update

from labq.domain.notices import EVENT, recipients
from labq.domain.states import FINAL_RECIPE_STATES
from labq.errors import NotFoundError
from labq.store.base import Db
from labq.store.jobs import JobStore
from labq.store.tables import (
    Groups,
    JobNotices,
    Jobs,
    Notifications,
    RecipeSets,
    Users,
    Webhooks,
)
from labq.store.views import JobView


@dataclass(frozen=True)
class WebhookView:
    """A webhook without its secret."""

    id: int
    url: str
    user: str | None
    group: str | None
    created_by: str
    created_at: datetime


@dataclass(frozen=True)
class Outgoing:
    """One due notification, with what sending it needs."""

    id: int
    job_id: int
    kind: str
    target: str
    payload: dict[str, Any]
    attempts: int
    secret: str | None  # a webhook's; None for email, or when the webhook was removed


@dataclass(frozen=True)
class NotificationView:
    """One notification of a job, as the API and the job page show it."""

    id: int
    kind: str
    target: str
    state: str
    attempts: int
    next_at: datetime
    last_error: str | None
    created_at: datetime
    sent_at: datetime | None


class NoticeStore:
    """Webhooks per user or group; the outbox of job-end emails and webhook POSTs."""

    def __init__(self, db: Db, jobs: JobStore) -> None:
        self.db = db
        self.conn = db.conn
        self.jobs = jobs

    def add_webhook(
        self,
        url: str,
        secret: str,
        *,
        user: str | None,
        group: str | None,
        actor: str,
        now: datetime,
    ) -> int:
        """A webhook for a user's jobs or a group's (exactly one of them)."""
        with self.db.atomic():
            user_id = None if user is None else self.db.user_id(user)
            group_id = None if group is None else self.db.group_id(group)
            stmt = (
                insert(Webhooks)
                .values(
                    user_id=user_id,
                    group_id=group_id,
                    url=url,
                    secret=secret,
                    created_by=actor,
                    created_at=now,
                )
                .returning(Webhooks.id)
            )
            hook_id = self.conn.execute(stmt).scalar_one()
            whose = f"user {user}" if user is not None else f"group {group}"
            self.db.log(now, actor, "webhook", "add", object_id=hook_id, new=url, reason=whose)
        return hook_id

    def list_webhooks(self) -> list[WebhookView]:
        """Every webhook, oldest first."""
        stmt = (
            select(
                Webhooks.id,
                Webhooks.url,
                Users.name,
                Groups.name,
                Webhooks.created_by,
                Webhooks.created_at,
            )
            .outerjoin(Users, Users.id == Webhooks.user_id)
            .outerjoin(Groups, Groups.id == Webhooks.group_id)
            .order_by(Webhooks.id)
        )
        return [WebhookView(*row) for row in self.conn.execute(stmt)]

    def get_webhook(self, hook_id: int) -> WebhookView:
        """One webhook (without its secret)."""
        for hook in self.list_webhooks():
            if hook.id == hook_id:
                return hook
        raise NotFoundError(f"no webhook {hook_id}")

    def remove_webhook(self, hook_id: int, *, actor: str, now: datetime) -> None:
        """Remove a webhook; its pending notifications fail when their turn comes."""
        with self.db.atomic():
            hook = self.get_webhook(hook_id)
            self.conn.execute(delete(Webhooks).where(Webhooks.id == hook_id))
            self.db.log(now, actor, "webhook", "remove", object_id=hook_id, old=hook.url)

    def unnoticed_ended_jobs(self, *, limit: int = 100) -> list[int]:
        """Jobs every set of which has ended, not noticed yet (a retry may still be owed)."""
        open_set = exists().where(RecipeSets.job_id == Jobs.id, RecipeSets.finished_at.is_(None))
        noticed = exists().where(JobNotices.job_id == Jobs.id)
        stmt = select(Jobs.id).where(~open_set, ~noticed).order_by(Jobs.id).limit(limit)
        return list(self.conn.execute(stmt).scalars())

    def notice_job(
        self,
        job_id: int,
        *,
        now: datetime,
        email: bool,
        owner_domain: str | None,
        job_url: str | None,
    ) -> int:
        """Mark an ended job noticed and queue its notifications; how many were queued.

        Nothing is done for a job that has not ended (a retry is owed) or was noticed.
        """
        with self.db.atomic():
            job = self.jobs.load_job(job_id)
            if job.state not in FINAL_RECIPE_STATES:
                return 0
            seen = select(JobNotices.job_id).where(JobNotices.job_id == job_id)
            if self.conn.execute(seen).first() is not None:
                return 0
            self.conn.execute(
                insert(JobNotices).values(job_id=job_id, state=job.state.value, noticed_at=now)
            )
            payload = job_payload(job, job_url, now)
            rows: list[dict[str, Any]] = []
            if email:
                to = recipients(job.owner, job.spec.metadata, owner_domain)
                if to:
                    rows.append({"kind": "email", "webhook_id": None, "target": ",".join(to)})
            for hook_id, url in self._hooks_for(job):
                rows.append({"kind": "webhook", "webhook_id": hook_id, "target": url})
            for row in rows:
                self.conn.execute(
                    insert(Notifications).values(
                        job_id=job_id,
                        payload=payload,
                        state="pending",
                        attempts=0,
                        next_at=now,
                        created_at=now,
                        **row,
                    )
                )
        return len(rows)

    def _hooks_for(self, job: JobView) -> list[tuple[int, str]]:
        owner = select(Users.id).where(Users.name == job.owner).scalar_subquery()
        whose = [Webhooks.user_id == owner]
        if job.group is not None:
            whose.append(
                Webhooks.group_id
                == select(Groups.id).where(Groups.name == job.group).scalar_subquery()
            )
        stmt = select(Webhooks.id, Webhooks.url).where(or_(*whose)).order_by(Webhooks.id)
        return [(hook_id, url) for hook_id, url in self.conn.execute(stmt)]

    def due_notifications(self, now: datetime, *, limit: int = 50) -> list[Outgoing]:
        """Pending notifications whose time has come, oldest first."""
        stmt = (
            select(
                Notifications.id,
                Notifications.job_id,
                Notifications.kind,
                Notifications.target,
                Notifications.payload,
                Notifications.attempts,
                Webhooks.secret,
            )
            .outerjoin(Webhooks, Webhooks.id == Notifications.webhook_id)
            .where(Notifications.state == "pending", Notifications.next_at <= now)
            .order_by(Notifications.next_at, Notifications.id)
            .limit(limit)
        )
        return [Outgoing(*row) for row in self.conn.execute(stmt)]

    def mark_sent(self, notification_id: int, *, now: datetime) -> bool:
        """A notification went out; False when it was not pending (nothing changes)."""
        with self.db.atomic():
            done = self.conn.execute(
                update(Notifications)
                .where(Notifications.id == notification_id, Notifications.state == "pending")
                .values(state="sent", sent_at=now, attempts=Notifications.attempts + 1)
            )
        return done.rowcount == 1

    def mark_failed(
        self, notification_id: int, error: str, *, retry_at: datetime | None, now: datetime
    ) -> bool:
        """A try failed: tried again at ``retry_at``, or given up (None) and logged."""
        with self.db.atomic():
            values: dict[str, Any] = {
                "attempts": Notifications.attempts + 1,
                "last_error": error[:2000],
            }
            if retry_at is None:
                values["state"] = "failed"
            else:
                values["next_at"] = retry_at
            done = self.conn.execute(
                update(Notifications)
                .where(Notifications.id == notification_id, Notifications.state == "pending")
                .values(**values)
                .returning(Notifications.job_id, Notifications.kind, Notifications.target)
            ).all()
            if done and retry_at is None:
                job_id, kind, target = done[0]
                self.db.log(
                    now, "labq", "job", f"{kind}-failed", object_id=job_id, new=target, reason=error
                )
        return len(done) == 1

    def job_notifications(self, job_id: int) -> list[NotificationView]:
        """A job's notifications, in the order they were queued."""
        stmt = (
            select(
                Notifications.id,
                Notifications.kind,
                Notifications.target,
                Notifications.state,
                Notifications.attempts,
                Notifications.next_at,
                Notifications.last_error,
                Notifications.created_at,
                Notifications.sent_at,
            )
            .where(Notifications.job_id == job_id)
            .order_by(Notifications.id)
        )
        return [NotificationView(*row) for row in self.conn.execute(stmt)]


def job_payload(job: JobView, job_url: str | None, now: datetime) -> dict[str, Any]:
    """The JSON body of a job's end (the email is written from it too)."""
    return {
        "event": EVENT,
        "at": now.isoformat(),
        "job": {
            "id": job.id,
            "owner": job.owner,
            "group": job.group,
            "whiteboard": job.spec.whiteboard,
            "state": job.state.value,
            "result": None if job.result is None else job.result.value,
            "submitted_at": job.submitted_at.isoformat(),
            "cc": list(recipients("", job.spec.metadata, None)),
            "url": job_url,
        },
    }
