"""Submitting a job: reading its document, pinning its ref, and storing it with every check.

A submission is refused, and nothing of it stored, when the caller names a group
they are not in, when a filter rule rejects it, when it depends on what does not
exist, or when one of its recipe sets could never run (:mod:`.feasibility`). The
scheduler hears of it once the transaction has committed: the adapter posts
:class:`~labq.domain.events.JobSubmitted`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from labq.config import Retention
from labq.dispatch.workspace import RefError, resolve_ref
from labq.domain.job import JobSpec
from labq.domain.model import User
from labq.domain.retention import check_tag, job_tag
from labq.errors import ConflictError, ForbiddenError, RequestError
from labq.formats.limits import Limits
from labq.formats.loader import detect_format, read_job
from labq.formats.names import Format
from labq.formats.origins import Origins
from labq.formats.source import decode_document
from labq.store import Repository
from labq.usecases.feasibility import Fleet, refuse_unrunnable

ResolveRef = Callable[[str, str], str]  # (repository, branch) -> commit


class Gate(Protocol):
    """What lets a large document be parsed only in its turn (the server's ``DocumentGate``)."""

    def turn(self, size: int) -> AbstractContextManager[None]:
        """Hold a turn for a document of ``size`` bytes while it is parsed."""


@dataclass(frozen=True)
class Document:
    """A job document read: its text, its format (never ``auto``), its spec, and where each
    part of the spec came from in the text."""

    text: str
    format: Format
    spec: JobSpec
    origins: Origins


def read_document(data: bytes, fmt: Format, *, limits: Limits, gate: Gate) -> Document:
    """Decode and parse a submitted document (``auto``: recognise its format); a large one
    waits for its turn at ``gate``."""
    text = decode_document(data, source="job", limit=limits.document_bytes)
    chosen = detect_format(text) if fmt == "auto" else fmt
    with gate.turn(len(data)):  # parsed on this worker thread, large ones in turn
        spec, origins = read_job(text, source="job", fmt=chosen, limits=limits)
    return Document(text, chosen, spec, origins)


def prepare(spec: JobSpec, retention: Retention, resolve: ResolveRef = resolve_ref) -> JobSpec:
    """What a submission checks before its transaction: its ref pinned, its retention tag
    one the settings know."""
    spec = pin_ref(spec, resolve)
    check_tag(job_tag(spec.metadata, retention.default), retention.tags)
    return spec


def pin_ref(spec: JobSpec, resolve: ResolveRef = resolve_ref) -> JobSpec:
    """A job's ``ref`` branch resolved to the commit every recipe will run.

    A commit the job names itself is kept. Resolved before the transaction: asking
    the repository (``git ls-remote``) may take seconds, and no write lock is held
    meanwhile. A ref that cannot be resolved refuses the job (:class:`RequestError`).
    """
    ref = spec.ref
    if ref is None or ref.commit is not None:
        return spec
    try:
        commit = resolve(ref.repo, ref.branch)
    except RefError as exc:
        raise RequestError(f"cannot pin ref: {exc}", place="ref") from None
    return spec.model_copy(update={"ref": ref.model_copy(update={"commit": commit})})


def submit_job(
    repo: Repository,
    caller: User,
    spec: JobSpec,
    fmt: str,
    *,
    now: datetime,
    run_id: int | None = None,
    source: str | None = None,
    fleet: Fleet | None = None,
    origins: Origins | None = None,
) -> int:
    """Store one parsed job for ``caller`` with every check a submission passes; its id.

    ``source`` is the document it was parsed from, kept verbatim for ``clone``; ``fleet``
    the systems to check it against, when the caller loaded them (the jobs of a run);
    ``origins`` where its parts came from in that document, for the line of a refusal.
    A refusal raises, and the caller's transaction must then store nothing.
    """
    user = repo.people.get_user(caller.name)
    group = spec.group
    if group is not None and group in repo.people.list_groups() and not user.member_of(group):
        raise ForbiddenError(f"{user.name!r} is not a member of group {group!r}", place="group")
    job_id = repo.queue.submit_job(spec, owner=user.name, now=now, source_format=fmt, run_id=run_id)
    if source is not None:
        repo.sources.keep_source(job_id, source)
    admit_job(repo, job_id, spec)
    # a set no system can ever run is refused, and the transaction stores nothing
    if fleet is None:
        fleet = Fleet.of(
            repo.systems.list_systems(), repo.access.load_access_policy(), repo.distros.trees()
        )
    refuse_unrunnable(spec, fleet, origins)
    return job_id


def admit_job(repo: Repository, job_id: int, spec: JobSpec) -> None:
    """Store the job's ``depends`` (an :class:`InputError` naming ``depends[i]``) and refuse
    it while a reject rule matches it (:class:`ConflictError`)."""
    repo.admission.add_dependencies(job_id, spec.depends)
    rule = repo.admission.rejecting_rule(job_id)
    if rule is not None:
        raise ConflictError(f"the job is refused: rejected by {rule.describe()}")
