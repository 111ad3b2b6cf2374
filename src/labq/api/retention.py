"""``/jobs/{id}/retention`` (a job's tag, when its logs expire or were deleted) and
``/logs/prune`` (delete expired logs now; admins)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from labq.api.openapi import answers
from labq.gateway.deps import AdminDep, StateDep, UserDep
from labq.gateway.schemas import RowId
from labq.store import reading
from labq.usecases import retention

router = APIRouter(tags=["retention"])


@router.get("/jobs/{job_id}/retention", responses=answers(404))
def job_retention(job_id: RowId, app: StateDep, _: UserDep) -> dict[str, Any]:
    """The job's retention tag and its lifetime; when its logs expire, or were deleted."""
    with reading(app.engine) as repo:
        found = retention.job_retention(repo, job_id, app.settings.retention)
    record = found.deleted
    return {
        "id": job_id,
        "tag": found.tag,
        "lifetime_days": found.lifetime_days,
        "known_tag": found.known_tag,
        "ended_at": found.ended_at,
        "expires_at": found.expires_at,
        "deleted_at": None if record is None else record.deleted_at,
        "deleted_files": None if record is None else record.files,
        "deleted_bytes": None if record is None else record.bytes,
    }


@router.post("/logs/prune", responses=answers(403))
def prune_logs(app: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Delete the logs of every job whose retention has run out, now (admins)."""
    settings = app.settings
    done = retention.prune_logs(
        app.engine, admin, settings.retention, settings.data_path(), now=app.clock()
    )
    return {
        "pruned": [
            {"job": p.job_id, "tag": p.tag, "files": p.files, "bytes": p.bytes} for p in done
        ]
    }
