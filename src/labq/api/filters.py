"""Eligibility controls: ``/filters`` (queue filter rules) and ``/queue/pause|resume|pauses``.

Anyone with a token may list them; only admins change them. A change is
committed, then the scheduler is told (``FiltersChanged``, ``PauseChanged``)
and judges the sets that have not started yet again. A reject rule refuses a job
at submission (:func:`labq.usecases.submission.admit_job`).
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from fastapi import APIRouter
from pydantic import Field

from labq.api.openapi import answers
from labq.gateway.deps import AdminDep, StateDep, UserDep
from labq.gateway.posting import committing
from labq.gateway.schemas import INT4_MAX, INTEGRAL, NO_NUL, Body, Name, Reason, RowId
from labq.store import reading
from labq.store.filters import FilterView
from labq.store.pauses import PauseView
from labq.usecases import filters as rules

router = APIRouter(prefix="/filters", tags=["filters"])
pauses = APIRouter(prefix="/queue", tags=["queue"])

MAX_PREDICATES: Final = 32
MAX_PAUSE_S: Final = 10 * 365 * 24 * 3600  # ten years: longer is "until resumed"
Action = Literal["accept", "continue", "pause", "reject", "rate-limit"]


class FilterBody(Body):
    """A filter rule: predicates are ``FIELD OP VALUE`` texts (``owner=alice``, ``job>=12``)."""

    action: Action
    rate: Annotated[int, Field(ge=1, le=INT4_MAX), INTEGRAL] | None = None
    priority: Annotated[int, Field(ge=0, le=1_000_000), INTEGRAL] = 0
    predicates: Annotated[
        list[Annotated[str, Field(max_length=1100), NO_NUL]], Field(max_length=MAX_PREDICATES)
    ] = Field(default_factory=list)
    comment: Reason | None = None


class PauseBody(Body):
    """Pause a lab's queue until a time (ISO 8601 with a zone), for seconds, or until resumed."""

    lab: Name
    until: Annotated[str, Field(max_length=64), NO_NUL] | None = None
    for_s: Annotated[float, Field(gt=0, le=MAX_PAUSE_S)] | None = None
    reason: Reason | None = None


class ResumeBody(Body):
    """The lab whose queue moves again."""

    lab: Name


# --- filters ---------------------------------------------------------------------------


@router.get("")
def list_filters(app: StateDep, _: UserDep) -> dict[str, Any]:
    """Every rule, in the order they are tried (priority, then id)."""
    with reading(app.engine) as repo:
        return {"filters": [filter_json(f) for f in repo.filters.list_filters()]}


@router.post("", status_code=201)
def add_filter(body: FilterBody, app: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Add a rule (admins); sets not started yet are judged again, reject cancels."""
    with committing(app) as (repo, sink):
        view = rules.add_filter(
            repo,
            admin,
            action=body.action,
            rate=body.rate,
            priority=body.priority,
            predicates=body.predicates,
            comment=body.comment,
            now=app.clock(),
            sink=sink,
        )
    return filter_json(view)


@router.delete("/{filter_id}", responses=answers(404))
def delete_filter(filter_id: RowId, app: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Remove a rule (admins); the sets it held are judged again."""
    with committing(app) as (repo, sink):
        rules.delete_filter(repo, admin, filter_id, now=app.clock(), sink=sink)
    return {"id": filter_id, "deleted": True}


def filter_json(view: FilterView) -> dict[str, Any]:
    """A rule as the API shows it."""
    rule = view.rule
    return {
        "id": rule.id,
        "priority": rule.priority,
        "action": rule.action,
        "rate": rule.rate,
        "predicates": [str(p) for p in rule.predicates],
        "comment": rule.comment,
        "created_by": view.created_by,
        "created_at": view.created_at,
    }


# --- paused lab queues -----------------------------------------------------------------


@pauses.get("/pauses")
def list_pauses(app: StateDep, _: UserDep) -> dict[str, Any]:
    """The labs whose queue is paused now."""
    with reading(app.engine) as repo:
        return {"pauses": [pause_json(p) for p in repo.pauses.list_pauses(now=app.clock())]}


@pauses.post("/pause", responses=answers(404))
def pause_queue(body: PauseBody, app: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Pause a lab's queue (admins): nothing new starts or takes systems there; runs go on."""
    now = app.clock()
    until = rules.pause_until(body.until, body.for_s, now)
    with committing(app) as (repo, sink):
        view = rules.pause_queue(
            repo, admin, body.lab, until=until, reason=body.reason, now=now, sink=sink
        )
    return pause_json(view)


@pauses.post("/resume", responses=answers(404))
def resume_queue(body: ResumeBody, app: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Let a lab's queue move again (admins); ``resumed`` is false when it was not paused."""
    with committing(app) as (repo, sink):
        resumed = rules.resume_queue(repo, admin, body.lab, now=app.clock(), sink=sink)
    return {"lab": body.lab, "resumed": resumed}


def pause_json(view: PauseView) -> dict[str, Any]:
    """A paused lab queue as the API shows it."""
    return {
        "lab": view.lab,
        "since": view.since,
        "until": view.until,
        "reason": view.reason,
        "paused_by": view.paused_by,
    }
