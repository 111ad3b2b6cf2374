"""A job document submitted over HTTP, the same way from the API and from the web form."""

from __future__ import annotations

from labq.domain.events import JobSubmitted
from labq.domain.model import User
from labq.formats.names import Format
from labq.gateway.deps import AppState
from labq.store import transaction
from labq.usecases import submission
from labq.usecases.posting import post_all


def submit_document(app: AppState, caller: User, data: bytes, fmt: Format) -> tuple[int, str]:
    """Read, check and store ``data``; tell the scheduler once it is committed.

    The job's id and the format it was read as.
    """
    limits = app.settings.limits
    document = submission.read_document(data, fmt, limits=limits, gate=app.documents)
    spec = submission.prepare(document.spec, app.settings.retention)
    with transaction(app.engine) as repo:
        job_id = submission.submit_job(
            repo,
            caller,
            spec,
            document.format,
            now=app.clock(),
            source=document.text,
            origins=document.origins,
        )
    post_all(app.events, [JobSubmitted(job_id)])
    return job_id, document.format
