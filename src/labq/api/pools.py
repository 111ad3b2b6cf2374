"""``/pools``: list with access rules (everyone); add, membership and rules (admins).

Membership and rule changes are told to the scheduler as ``access_changed``:
both change which groups may use which systems, and at what priority.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from labq.api.deps import AdminDep, StateDep, UserDep
from labq.api.events import tell
from labq.api.openapi import answers
from labq.api.schemas import Body, Name, NameBody, PriorityLabel
from labq.domain.priority import Priority
from labq.store import reading, transaction

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
        names = repo.access.list_pools()
        policy = repo.access.load_access_policy()
        members: dict[str, list[str]] = {name: [] for name in names}
        for system in repo.systems.list_systems():
            for pool in system.pools:
                members[pool].append(system.fqdn)
    return {
        "pools": [
            {
                "name": name,
                "systems": members[name],
                "restricted": name in policy.rules,
                "rules": {g: p.label for g, p in sorted(policy.rules.get(name, {}).items())},
            }
            for name in names
        ]
    }


@router.post("", status_code=201, responses=answers(409))
def add_pool(body: NameBody, state: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Add a pool, open to every group until its first rule (admins)."""
    with transaction(state.engine) as repo:
        pool_id = repo.access.add_pool(body.name, actor=admin.name, now=state.clock())
    return {"id": pool_id, "name": body.name}


@router.post("/{pool}/systems", responses=answers(404))
def add_to_pool(pool: str, body: MemberBody, state: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Put a system in the pool (admins)."""
    with transaction(state.engine) as repo:
        changed = repo.access.add_to_pool(body.fqdn, pool, actor=admin.name, now=state.clock())
    if changed:
        tell(state.events.access_changed)
    return {"pool": pool, "fqdn": body.fqdn, "changed": changed}


@router.delete("/{pool}/systems/{fqdn}", responses=answers(404))
def remove_from_pool(pool: str, fqdn: str, state: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Take a system out of the pool (admins)."""
    with transaction(state.engine) as repo:
        changed = repo.access.remove_from_pool(fqdn, pool, actor=admin.name, now=state.clock())
    if changed:
        tell(state.events.access_changed)
    return {"pool": pool, "fqdn": fqdn, "changed": changed}


@router.put("/{pool}/rules/{group}", responses=answers(404))
def set_rule(
    pool: str, group: str, body: RuleBody, state: StateDep, admin: AdminDep
) -> dict[str, Any]:
    """Let ``group`` use the pool up to ``max_priority``, replacing its rule there (admins)."""
    with transaction(state.engine) as repo:
        repo.access.allow(
            pool, group, Priority.parse(body.max_priority), actor=admin.name, now=state.clock()
        )
    tell(state.events.access_changed)
    return {"pool": pool, "group": group, "max_priority": body.max_priority}


@router.delete("/{pool}/rules/{group}", responses=answers(404))
def revoke_rule(pool: str, group: str, state: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Remove ``group``'s rule on the pool; the pool stays restricted (admins)."""
    with transaction(state.engine) as repo:
        changed = repo.access.revoke(pool, group, actor=admin.name, now=state.clock())
    if changed:
        tell(state.events.access_changed)
    return {"pool": pool, "group": group, "changed": changed}
