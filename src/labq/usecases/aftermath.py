"""What is known of a job's end: its logs' retention, and the notifications it sent."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from labq.config import Retention
from labq.domain.model import User
from labq.domain.retention import expires_at, job_tag
from labq.store import JobView, Repository
from labq.store.notices import NotificationView
from labq.usecases.permissions import may_change_job


@dataclass(frozen=True)
class Aftermath:
    """The job's retention tag and its logs' fate; the notifications its end sent."""

    tag: str
    lifetime_days: float | None
    ended_at: datetime | None
    expires_at: datetime | None
    deleted_at: datetime | None
    notifications: list[NotificationView] | None  # None: not this reader's to see

    @property
    def failed(self) -> list[NotificationView]:
        """Notifications given up on, or failing and to be tried again."""
        return [n for n in self.notifications or [] if n.state == "failed" or n.last_error]


def job_aftermath(repo: Repository, reader: User, job: JobView, retention: Retention) -> Aftermath:
    """The job's retention and, for whoever may change the job, its notifications."""
    tag = job_tag(job.spec.metadata, retention.default)
    ended = repo.retention.job_ended_at(job.id)
    record = repo.retention.prune_record(job.id)
    notes = repo.notices.job_notifications(job.id) if may_change_job(reader, job) else None
    return Aftermath(
        tag=tag,
        lifetime_days=retention.tags.get(tag),
        ended_at=ended,
        expires_at=None if ended is None else expires_at(ended, tag, retention.tags),
        deleted_at=None if record is None else record.deleted_at,
        notifications=notes,
    )
