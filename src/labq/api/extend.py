"""``POST /jobs/{id}/extend``: move running sets' max_time deadline (Beaker's watchdog-extend).

Allowed to whoever may change the job (its owner, its group's members, admins).
The whole extension of a set is capped by ``limits.max_extend``. A set's supervisor
hears its new max_time with its next heartbeat and keeps to it from then on.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import Field

from labq.api.deps import StateDep, UserDep
from labq.api.openapi import answers
from labq.api.schemas import INT4_MAX, INTEGRAL, Body, RowId
from labq.store import transaction
from labq.usecases.permissions import require_job_change

router = APIRouter(prefix="/jobs", tags=["jobs"])


class ExtendBody(Body):
    """How many seconds more; one set of the job (default: every running set with a max_time)."""

    by: Annotated[int, Field(ge=1, le=INT4_MAX), INTEGRAL]
    set: RowId | None = None


@router.post("/{job_id}/extend", responses=answers(403, 404, 409, 422))
def extend_job(job_id: RowId, body: ExtendBody, app: StateDep, caller: UserDep) -> dict[str, Any]:
    """Extend the max_time of the job's running sets by ``by`` seconds."""
    with transaction(app.engine) as repo:
        require_job_change(caller, repo.jobs.load_job(job_id))
        done = repo.extensions.extend_sets(
            job_id,
            body.by,
            ceiling=app.settings.limits.max_extend,
            actor=caller.name,
            now=app.clock(),
            set_id=body.set,
        )
    return {
        "id": job_id,
        "by": body.by,
        "sets": [{"id": e.set_id, "max_time": e.max_time, "extended": e.extended} for e in done],
    }
