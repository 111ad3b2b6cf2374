"""``/jobs/{id}/source`` and ``/jobs/{id}/clone`` (Beaker's ``bkr job-clone``).

A job's source is the document it was submitted as, verbatim. A job that has none
(stored before documents were kept, or a clone with changes) answers with its
canonical spec as native JSON. Anyone who may read a job may clone it, as in
Beaker: the clone is theirs, and is checked as any submission is (a group they
are not in is refused; ``group: everybody`` clones it for everybody).
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from fastapi import APIRouter, Response
from pydantic import Field

from labq.api.openapi import answers
from labq.domain.events import JobSubmitted
from labq.domain.priority import Priority
from labq.gateway.deps import StateDep, UserDep
from labq.gateway.schemas import NO_NUL, Body, Name, PriorityLabel, RowId
from labq.store import reading, transaction
from labq.usecases import clones
from labq.usecases.posting import post_all

router = APIRouter(prefix="/jobs", tags=["jobs"])

SOURCE_ANSWER: Final[dict[int | str, dict[str, Any]]] = {
    200: {
        "description": "the document as submitted (or the canonical spec as JSON)",
        "content": {
            m: {"schema": {"type": "string"}} for m in ("application/xml", "application/yaml")
        },
    }
}


class CloneBody(Body):
    """What the clone changes; everything else is the original's."""

    priority: PriorityLabel | None = None
    group: Name | None = None
    whiteboard: Annotated[str, Field(max_length=2000), NO_NUL] | None = None

    def changes(self) -> clones.CloneChanges:
        """The use case's changes."""
        level = None if self.priority is None else Priority.parse(self.priority)
        return clones.CloneChanges(level, self.group, self.whiteboard)


@router.get("/{job_id}/source", responses={**answers(404), **SOURCE_ANSWER})
def job_source(job_id: RowId, app: StateDep, _: UserDep) -> Response:
    """The document the job was submitted as, in its own content type."""
    with reading(app.engine) as repo:
        source = clones.job_source(repo, job_id)
    return Response(source.document, media_type=source.media_type)


@router.post("/{job_id}/clone", status_code=201, responses=answers(403, 404, 422))
def clone_job(
    job_id: RowId, app: StateDep, caller: UserDep, body: CloneBody | None = None
) -> dict[str, Any]:
    """Submit the job again as the caller's, recording what it was cloned from."""
    changes = (body or CloneBody()).changes()
    with reading(app.engine) as repo:
        plan = clones.plan_clone(repo, job_id, changes, limits=app.settings.limits)
    with transaction(app.engine) as repo:
        new_id = clones.clone_job(repo, caller, plan, now=app.clock())
    post_all(app.events, [JobSubmitted(new_id)])
    return {
        "id": new_id,
        "cloned_from": job_id,
        "format": plan.format,
        "url": f"/api/v1/jobs/{new_id}",
    }
