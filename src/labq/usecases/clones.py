"""Cloning a job (Beaker's ``bkr job-clone``), and the document a job was submitted as.

A job's source is the document it was submitted as, verbatim. A job that has none
(stored before documents were kept, or a clone with changes) shows its canonical
spec as native JSON. Anyone who may read a job may clone it, as in Beaker: the
clone is theirs, and is checked as any submission is (a group they are not in is
refused; ``group: everybody`` clones it for everybody).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from labq.domain.job import JobSpec
from labq.domain.model import User
from labq.domain.priority import Priority
from labq.formats.limits import Limits
from labq.formats.loader import parse_job
from labq.formats.names import Format
from labq.store import JobView, Repository
from labq.usecases.submission import submit_job

CANONICAL: Final = "application/json"
PARSED: Final[dict[str, Format]] = {
    "native": "native",
    "beaker": "beaker",
    "teuthology": "teuthology",
}


@dataclass(frozen=True)
class Source:
    """A job's document and its content type."""

    document: str
    media_type: str


def job_source(repo: Repository, job_id: int) -> Source:
    """The document the job was submitted as, in its own content type (or its canonical
    spec as JSON, when it kept none)."""
    document = repo.sources.job_source(job_id)
    if document is None:
        return Source(canonical_document(repo.jobs.load_job(job_id)), CANONICAL)
    fmt = repo.jobs.load_job(job_id).source_format
    return Source(document, media_type(fmt, document))


def media_type(fmt: str, document: str) -> str:
    """The content type of a kept document of format ``fmt``."""
    if fmt == "beaker":
        return "application/xml"
    return "application/json" if document.lstrip().startswith(("{", "[")) else "application/yaml"


def canonical_document(job: JobView) -> str:
    """A job's canonical spec as native JSON: what a job without a kept document clones."""
    spec = job.spec.model_copy(update={"owner": None})
    return json.dumps(spec.canonical(), indent=2) + "\n"


@dataclass(frozen=True)
class CloneChanges:
    """What a clone changes; everything else is the original's. An empty whiteboard clears
    it."""

    priority: Priority | None = None
    group: str | None = None
    whiteboard: str | None = None


@dataclass(frozen=True)
class ClonePlan:
    """What a clone submits, read before the transaction that stores it: the original's id
    and format, the spec, and the document it keeps (None after changes)."""

    original: int
    format: str
    spec: JobSpec
    document: str | None


def plan_clone(
    repo: Repository, job_id: int, changes: CloneChanges, *, limits: Limits
) -> ClonePlan:
    """Read the original and work out the clone's spec with ``changes`` applied."""
    original = repo.jobs.load_job(job_id)
    document = repo.sources.job_source(job_id)
    spec = changed(clone_spec(original, document, limits), changes)
    # a clone with changes is no longer its document: it keeps none, and shows its spec
    same = changes == CloneChanges()
    return ClonePlan(job_id, original.source_format, spec, document if same else None)


def clone_job(repo: Repository, caller: User, plan: ClonePlan, *, now: datetime) -> int:
    """Submit the clone as the caller's, checked as any submission is; its id."""
    new_id = submit_job(repo, caller, plan.spec, plan.format, now=now, source=plan.document)
    repo.sources.mark_clone(new_id, of=plan.original)
    return new_id


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


def changed(spec: JobSpec, changes: CloneChanges) -> JobSpec:
    """``spec`` with the changes' priority (every set), group and whiteboard."""
    update: dict[str, Any] = {}
    if changes.priority is not None:
        level = changes.priority
        update["recipe_sets"] = [s.model_copy(update={"priority": level}) for s in spec.recipe_sets]
    if changes.group is not None:
        update["group"] = changes.group
    if changes.whiteboard is not None:
        update["whiteboard"] = changes.whiteboard or None
    return spec.model_copy(update=update)
