"""``/jobs/{id}/retention`` (a job's tag, when its logs expire or were deleted) and
``/logs/prune`` (delete expired logs now; admins)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from labq.api.deps import AdminDep, StateDep, UserDep
from labq.api.openapi import answers
from labq.api.schemas import RowId
from labq.domain.retention import expires_at, job_tag
from labq.service.retention import prune
from labq.store import reading

router = APIRouter(tags=["retention"])


@router.get("/jobs/{job_id}/retention", responses=answers(404))
def job_retention(job_id: RowId, app: StateDep, _: UserDep) -> dict[str, Any]:
    """The job's retention tag and its lifetime; when its logs expire, or were deleted."""
    settings = app.settings.retention
    with reading(app.engine) as repo:
        ended = repo.retention.job_ended_at(job_id)
        job = repo.jobs.load_job(job_id)
        record = repo.retention.prune_record(job_id)
    tag = job_tag(job.spec.metadata, settings.default)
    return {
        "id": job_id,
        "tag": tag,
        "lifetime_days": settings.tags.get(tag),
        "known_tag": tag in settings.tags,
        "ended_at": ended,
        "expires_at": None if ended is None else expires_at(ended, tag, settings.tags),
        "deleted_at": None if record is None else record.deleted_at,
        "deleted_files": None if record is None else record.files,
        "deleted_bytes": None if record is None else record.bytes,
    }


@router.post("/logs/prune", responses=answers(403))
def prune_logs(app: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Delete the logs of every job whose retention has run out, now (admins)."""
    done = prune(
        app.engine,
        app.settings.retention,
        app.settings.data_path(),
        now=app.clock(),
        actor=admin.name,
    )
    return {
        "pruned": [
            {"job": p.job_id, "tag": p.tag, "files": p.files, "bytes": p.bytes} for p in done
        ]
    }
