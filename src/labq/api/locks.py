"""``/locks``: the lock service — running sets take and release shared and exclusive locks.

A set's own token (``LABQ_TOKEN`` in its tasks) acts for that set; an admin
names the set. Every acquire also takes the set's lab's whole-lab lock shared,
so a set holding the whole lab excludes every other set of that lab. Answers:
200 granted, 202 waiting (ask again to keep the place; a waiter silent for a
minute is dropped), 409 refused (it would deadlock, or ``wait`` was false).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import Field

from labq.api.openapi import answers
from labq.domain.locktable import Grant, Outcome
from labq.gateway.deps import CredentialDep, StateDep, UserDep
from labq.gateway.errors import ApiError
from labq.gateway.posting import committing
from labq.gateway.schemas import Body, Name, RowId
from labq.store import reading
from labq.usecases import locks

router = APIRouter(prefix="/locks", tags=["locks"])
WAITING = {"description": "waiting for the locks: ask again to keep the place"}


class LockRef(Body):
    """One lock: a resource ``name`` (``*`` for all) on a lock ``level``."""

    level: Name
    name: Name
    exclusive: bool = False


class AcquireBody(Body):
    """Locks to take all together; ``set`` only for admins (a set's token acts for its set)."""

    locks: Annotated[list[LockRef], Field(min_length=1, max_length=100)]
    wait: bool = True
    set: RowId | None = None


class ReleaseBody(Body):
    """Locks to let go of, or ``all``."""

    locks: Annotated[list[LockRef], Field(max_length=100)] = Field(default_factory=list)
    all: bool = False
    set: RowId | None = None


@router.post("/acquire", responses={202: WAITING, **answers(404, 409)})
def acquire(state: StateDep, found: CredentialDep, body: AcquireBody) -> JSONResponse:
    """Take every lock of ``locks`` for the set, or wait (202) or be refused (409)."""
    set_id = locks.acting_set(found, body.set)
    wanted = locks.grants(state.settings.queue.lock_levels, _wanted(body.locks))
    with committing(state) as (repo, sink):
        outcome, held = locks.acquire(
            repo, set_id, wanted, wait=body.wait, now=state.clock(), sink=sink
        )
    locks.refuse_unless_granted_or_waiting(set_id, outcome, wait=body.wait)
    if outcome.granted:
        return JSONResponse({"set": set_id, "granted": True, "held": _grants_json(held)})
    return JSONResponse(_waiting_json(set_id, outcome), status_code=202)


@router.post("/release", responses=answers(404, 409))
def release(state: StateDep, found: CredentialDep, body: ReleaseBody) -> dict[str, Any]:
    """Let go of some locks of the set (or ``all``); waiters they blocked may get theirs."""
    set_id = locks.acting_set(found, body.set)
    if not body.all and not body.locks:
        raise ApiError(422, "name the locks to release, or say all: true", place="locks")
    levels = state.settings.queue.lock_levels
    wanted = None if body.all else locks.grants(levels, _wanted(body.locks))
    with committing(state) as (repo, sink):
        served, held = locks.release(repo, set_id, wanted, now=state.clock(), sink=sink)
    return {"set": set_id, "held": _grants_json(held), "served": served}


def _wanted(refs: list[LockRef]) -> list[locks.Wanted]:
    return [locks.Wanted(ref.level, ref.name, ref.exclusive) for ref in refs]


@router.get("")
def list_locks(state: StateDep, _: UserDep) -> dict[str, Any]:
    """Who holds which lock, and who waits, first come first."""
    with reading(state.engine) as repo:
        held = repo.locks.held_locks()
        waits = repo.locks.lock_waits(now=state.clock())
    return {
        "held": [
            {"set": set_id, **_grant_json(grant)}
            for set_id, grants in sorted(held.items())
            for grant in grants
        ],
        "waiting": [
            {
                "set": wait.set_id,
                "locks": _grants_json(wait.grants),
                "since": wait.since.isoformat(),
                "waiting_on": [str(b) for b in wait.blockers],
            }
            for wait in waits
        ],
    }


def _grant_json(grant: Grant) -> dict[str, Any]:
    return {"level": grant.level, "name": grant.name, "exclusive": grant.exclusive}


def _grants_json(grants: tuple[Grant, ...] | list[Grant]) -> list[dict[str, Any]]:
    return [_grant_json(g) for g in grants]


def _waiting_json(set_id: int, outcome: Outcome) -> dict[str, Any]:
    return {
        "set": set_id,
        "granted": False,
        "waiting_on": [str(b) for b in outcome.blockers],
    }
