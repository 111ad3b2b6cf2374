"""``/pools``: list with access rules (everyone); add, membership and rules (admins).

Membership and rule changes are told to the scheduler as ``AccessChanged``:
both change which groups may use which systems, and at what priority.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import APIRouter

from labq.api.openapi import answers
from labq.gateway.deps import AdminDep, StateDep, UserDep
from labq.gateway.posting import committing
from labq.gateway.schemas import Body, Name, NameBody, PriorityLabel
from labq.store import reading, transaction
from labq.usecases import pools

router = APIRouter(prefix="/pools", tags=["pools"])


class MemberBody(Body):
    """A system to put in a pool."""

    fqdn: Name


class RuleBody(Body):
    """The highest effective priority a group may have on a pool (seed 002)."""

    max_priority: PriorityLabel


@router.get("")
def list_pools(state: StateDep, _: UserDep) -> dict[str, Any]:
    """Every pool with its systems and rules; ``restricted``: only its rules count."""
    with reading(state.engine) as repo:
        found = pools.pool_access(repo)
    return {"pools": [dataclasses.asdict(pool) for pool in found]}


@router.post("", status_code=201, responses=answers(409))
def add_pool(body: NameBody, state: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Add a pool, open to every group until its first rule (admins)."""
    with transaction(state.engine) as repo:
        pool_id = pools.add_pool(repo, admin, body.name, now=state.clock())
    return {"id": pool_id, "name": body.name}


@router.post("/{pool}/systems", responses=answers(404))
def add_to_pool(pool: str, body: MemberBody, state: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Put a system in the pool (admins)."""
    with committing(state) as (repo, sink):
        changed = pools.add_to_pool(repo, admin, pool, body.fqdn, now=state.clock(), sink=sink)
    return {"pool": pool, "fqdn": body.fqdn, "changed": changed}


@router.delete("/{pool}/systems/{fqdn}", responses=answers(404))
def remove_from_pool(pool: str, fqdn: str, state: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Take a system out of the pool (admins)."""
    with committing(state) as (repo, sink):
        changed = pools.remove_from_pool(repo, admin, pool, fqdn, now=state.clock(), sink=sink)
    return {"pool": pool, "fqdn": fqdn, "changed": changed}


@router.put("/{pool}/rules/{group}", responses=answers(404))
def set_rule(
    pool: str, group: str, body: RuleBody, state: StateDep, admin: AdminDep
) -> dict[str, Any]:
    """Let ``group`` use the pool up to ``max_priority``, replacing its rule there (admins)."""
    with committing(state) as (repo, sink):
        pools.set_rule(repo, admin, pool, group, body.max_priority, now=state.clock(), sink=sink)
    return {"pool": pool, "group": group, "max_priority": body.max_priority}


@router.delete("/{pool}/rules/{group}", responses=answers(404))
def revoke_rule(pool: str, group: str, state: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Remove ``group``'s rule on the pool; the pool stays restricted (admins)."""
    with committing(state) as (repo, sink):
        changed = pools.revoke_rule(repo, admin, pool, group, now=state.clock(), sink=sink)
    return {"pool": pool, "group": group, "changed": changed}
