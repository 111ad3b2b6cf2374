"""Submitting several jobs as one run (Pulpito's runs): stored whole or not at all.

Every document is parsed, and its ref pinned, before the transaction; inside it,
each job is checked as any submission is, against one load of the systems, and
one bad document refuses the run, its refusal naming the document.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from labq.dispatch.workspace import resolve_ref
from labq.domain.job import JobSpec
from labq.domain.model import User
from labq.errors import ConflictError, ForbiddenError, InputError
from labq.formats.limits import Limits
from labq.formats.loader import detect_format, read_job
from labq.formats.names import Format
from labq.formats.origins import Origins
from labq.store import Repository
from labq.usecases.feasibility import Fleet
from labq.usecases.submission import ResolveRef, pin_ref, submit_job


@dataclass(frozen=True)
class RunDocument:
    """One job of a run: what to call it in errors, its document, its format."""

    name: str
    document: str
    format: Format = "auto"


@dataclass(frozen=True)
class RunJob:
    """One job of a run, read and pinned: its document, spec, format and origins."""

    source: RunDocument
    spec: JobSpec
    format: Format
    origins: Origins


def read_run(
    documents: Sequence[RunDocument], *, limits: Limits, resolve: ResolveRef = resolve_ref
) -> list[RunJob]:
    """Parse every document of a run and pin its ref (before the transaction)."""
    jobs = []
    for doc in documents:
        fmt: Format = detect_format(doc.document) if doc.format == "auto" else doc.format
        spec, origins = read_job(doc.document, source=doc.name, fmt=fmt, limits=limits)
        jobs.append(RunJob(doc, pin_ref(spec, resolve), fmt, origins))
    return jobs


def submit_run(
    repo: Repository,
    caller: User,
    name: str,
    jobs: Sequence[RunJob],
    *,
    now: datetime,
    meta: Mapping[str, Any],
) -> list[int]:
    """Store the run and every job of it, each checked as a submission is; their ids."""
    run_id = repo.runs.create_run(name, owner=caller.name, now=now, meta=dict(meta))
    # storing a job changes no system or pool: every job is checked against one load
    fleet = Fleet.of(
        repo.systems.list_systems(), repo.access.load_access_policy(), repo.distros.trees()
    )
    return [_submit_named(repo, caller, job, now=now, run_id=run_id, fleet=fleet) for job in jobs]


def _submit_named(
    repo: Repository, caller: User, job: RunJob, *, now: datetime, run_id: int, fleet: Fleet
) -> int:
    """``submit_job``, its refusals naming the document they are about."""
    name = job.source.name
    try:
        return submit_job(
            repo,
            caller,
            job.spec,
            job.format,
            now=now,
            run_id=run_id,
            source=job.source.document,
            fleet=fleet,
            origins=job.origins,
        )
    except (ForbiddenError, ConflictError) as exc:  # the group's, a reject rule's
        raise type(exc)(f"{name}: {exc}", place=exc.place) from None
    except InputError as exc:
        raise exc.within(source=name) from None
