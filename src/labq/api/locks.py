"""``/locks``: the lock service — running sets take and release shared and exclusive locks.

A set's own token (``LABQ_TOKEN`` in its tasks) acts for that set; an admin
names the set. Every acquire also takes the set's lab's whole-lab lock shared,
so a set holding the whole lab excludes every other set of that lab. Answers:
200 granted, 202 waiting (ask again to keep the place; a waiter silent for a
minute is dropped), 409 refused (it would deadlock, or ``wait`` was false).
"""

from __future__ import annotations

import functools
from typing import Annotated, Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import Field

from labq.api.deps import CredentialDep, StateDep, UserDep
from labq.api.errors import ApiError
from labq.api.events import tell
from labq.api.openapi import answers
from labq.api.schemas import Body, Name, RowId
from labq.domain.locktable import Grant, Outcome
from labq.store import Credential, reading, transaction

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
    set_id = _acting_set(found, body.set)
    wanted = _grants(state.settings.queue.lock_levels, body.locks)
    now = state.clock()
    with transaction(state.engine) as repo:
        outcome = repo.locks.acquire_locks(set_id, wanted, now=now, wait=body.wait, lab_lock=True)
        held = repo.locks.held_locks([set_id]).get(set_id, ())
    if outcome.granted:
        tell(lambda: state.events.locks_changed(set_id))
        return JSONResponse({"set": set_id, "granted": True, "held": _grants_json(held)})
    if outcome.refused is not None or not body.wait:
        reason = outcome.refused or outcome.describe()
        raise ApiError(409, f"recipe set {set_id}: {reason}", place="locks")
    return JSONResponse(_waiting_json(set_id, outcome), status_code=202)


@router.post("/release", responses=answers(404, 409))
def release(state: StateDep, found: CredentialDep, body: ReleaseBody) -> dict[str, Any]:
    """Let go of some locks of the set (or ``all``); waiters they blocked may get theirs."""
    set_id = _acting_set(found, body.set)
    if not body.all and not body.locks:
        raise ApiError(422, "name the locks to release, or say all: true", place="locks")
    grants = None if body.all else _grants(state.settings.queue.lock_levels, body.locks)
    with transaction(state.engine) as repo:
        served = repo.locks.release_locks(set_id, grants, now=state.clock())
        held = repo.locks.held_locks([set_id]).get(set_id, ())
    for changed in [set_id, *served]:
        tell(functools.partial(state.events.locks_changed, changed))
    return {"set": set_id, "held": _grants_json(held), "served": served}


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


def _acting_set(found: Credential, named: int | None) -> int:
    if found.recipe_set is not None:
        if named not in (None, found.recipe_set):
            raise ApiError(403, f"this token acts for recipe set {found.recipe_set} only")
        return found.recipe_set
    if not found.user.admin:
        raise ApiError(403, "locks are taken by a running set's own token (LABQ_TOKEN), or admins")
    if named is None:
        raise ApiError(422, "say which recipe set the locks are for", place="set")
    return named


def _grants(levels: tuple[str, ...], refs: list[LockRef]) -> list[Grant]:
    for index, ref in enumerate(refs):
        if ref.level not in levels:
            known = ", ".join(levels)
            raise ApiError(
                422,
                f"unknown lock level {ref.level!r} (expected one of {known}; the whole-lab"
                " lock is declared in the job, not taken by tasks)",
                place=f"locks[{index}].level",
            )
    return [Grant(ref.level, ref.name, ref.exclusive) for ref in refs]


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
