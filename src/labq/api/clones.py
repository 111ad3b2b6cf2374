"""``/jobs/{id}/source`` and ``/jobs/{id}/clone`` (Beaker's ``bkr job-clone``).

A job's source is the document it was submitted as, verbatim. A job that has none
(stored before documents were kept, or a clone with changes) answers with its
canonical spec as native JSON. Anyone who may read a job may clone it, as in
Beaker: the clone is theirs, and is checked as any submission is (a group they
are not in is refused; ``group: everybody`` clones it for everybody).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Final

from fastapi import APIRouter, Response
from pydantic import Field

from labq.api.deps import StateDep, UserDep
from labq.api.events import tell
from labq.api.jobs import store_job
from labq.api.openapi import answers
from labq.api.schemas import NO_NUL, Body, Name, PriorityLabel, RowId
from labq.domain.job import JobSpec
from labq.domain.priority import Priority
from labq.formats.limits import Limits
from labq.formats.loader import Format, parse_job
from labq.store import JobView, reading, transaction

router = APIRouter(prefix="/jobs", tags=["jobs"])

CANONICAL: Final = "application/json"
PARSED: Final[dict[str, Format]] = {
    "native": "native",
    "beaker": "beaker",
    "teuthology": "teuthology",
}
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


def media_type(fmt: str, document: str) -> str:
    """The content type of a kept document of format ``fmt``."""
    if fmt == "beaker":
        return "application/xml"
    return "application/json" if document.lstrip().startswith(("{", "[")) else "application/yaml"


def canonical_document(job: JobView) -> str:
    """A job's canonical spec as native JSON: what a job without a kept document clones."""
    spec = job.spec.model_copy(update={"owner": None})
    return json.dumps(spec.canonical(), indent=2) + "\n"


@router.get("/{job_id}/source", responses={**answers(404), **SOURCE_ANSWER})
def job_source(job_id: RowId, app: StateDep, _: UserDep) -> Response:
    """The document the job was submitted as, in its own content type."""
    with reading(app.engine) as repo:
        document = repo.sources.job_source(job_id)
        if document is None:
            return Response(canonical_document(repo.jobs.load_job(job_id)), media_type=CANONICAL)
        fmt = repo.jobs.load_job(job_id).source_format
    return Response(document, media_type=media_type(fmt, document))


def clone_spec(job: JobView, document: str | None, limits: Limits) -> JobSpec:
    """The spec a clone submits: its kept document parsed again, else its canonical spec.

    The ref stays pinned to the commit the original ran (a clone runs the same thing).
    """
    fmt = PARSED.get(job.source_format)
    if document is None or fmt is None:
        spec = job.spec
    else:
        spec = parse_job(document, source=f"job {job.id}", fmt=fmt, limits=limits)
        spec = spec.model_copy(update={"ref": job.spec.ref})
    return spec.model_copy(update={"owner": None})


def changed(spec: JobSpec, body: CloneBody) -> JobSpec:
    """``spec`` with the body's priority (every set), group and whiteboard."""
    update: dict[str, Any] = {}
    if body.priority is not None:
        level = Priority.parse(body.priority)
        update["recipe_sets"] = [s.model_copy(update={"priority": level}) for s in spec.recipe_sets]
    if body.group is not None:
        update["group"] = body.group
    if body.whiteboard is not None:
        update["whiteboard"] = body.whiteboard or None
    return spec.model_copy(update=update)


@router.post("/{job_id}/clone", status_code=201, responses=answers(403, 404, 422))
def clone_job(
    job_id: RowId, app: StateDep, caller: UserDep, body: CloneBody | None = None
) -> dict[str, Any]:
    """Submit the job again as the caller's, recording what it was cloned from."""
    body = body or CloneBody()
    with reading(app.engine) as repo:
        original = repo.jobs.load_job(job_id)
        document = repo.sources.job_source(job_id)
    spec = changed(clone_spec(original, document, app.settings.limits), body)
    # a clone with changes is no longer its document: it keeps none, and shows its spec
    same = body == CloneBody()
    with transaction(app.engine) as repo:
        new_id = store_job(
            repo,
            caller,
            spec,
            original.source_format,
            now=app.clock(),
            source=document if same else None,
        )
        repo.sources.mark_clone(new_id, of=job_id)
    tell(lambda: app.events.job_submitted(new_id))
    return {
        "id": new_id,
        "cloned_from": job_id,
        "format": original.source_format,
        "url": f"/api/v1/jobs/{new_id}",
    }
