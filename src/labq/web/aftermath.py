"""What the job page says of a job's end: its logs' retention, and its notifications."""

from __future__ import annotations

from labq.domain.model import User
from labq.gateway.deps import AppState
from labq.store import JobView, reading
from labq.usecases.aftermath import Aftermath
from labq.usecases.aftermath import job_aftermath as read_aftermath


def job_aftermath(app: AppState, reader: User, job: JobView) -> Aftermath:
    """Read what the page shows of the job's retention and notifications."""
    with reading(app.engine) as repo:
        return read_aftermath(repo, reader, job, app.settings.retention)
