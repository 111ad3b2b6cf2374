"""Pools: their systems and access rules (everyone reads); adding, membership and rules
(admins). A membership or rule change posts :class:`AccessChanged`: both change which
groups may use which systems, and at what priority."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from labq.domain.events import AccessChanged, EventSink
from labq.domain.model import User
from labq.domain.priority import Priority
from labq.store import Repository
from labq.usecases.permissions import require_admin


@dataclass(frozen=True)
class PoolAccess:
    """A pool, its systems and its rules (group → highest priority label);
    ``restricted``: only its rules count (a pool without rules is open to every group)."""

    name: str
    systems: list[str]
    restricted: bool
    rules: dict[str, str]


def pool_access(repo: Repository) -> list[PoolAccess]:
    """Every pool with its systems and rules, by name."""
    names = repo.access.list_pools()
    policy = repo.access.load_access_policy()
    members: dict[str, list[str]] = {name: [] for name in names}
    for system in repo.systems.list_systems():
        for pool in system.pools:
            members[pool].append(system.fqdn)
    return [
        PoolAccess(
            name=name,
            systems=members[name],
            restricted=name in policy.rules,
            rules={g: p.label for g, p in sorted(policy.rules.get(name, {}).items())},
        )
        for name in names
    ]


def add_pool(repo: Repository, caller: User, name: str, *, now: datetime) -> int:
    """Add a pool, open to every group until its first rule (admins); returns its id."""
    require_admin(caller)
    return repo.access.add_pool(name, actor=caller.name, now=now)


def add_to_pool(
    repo: Repository, caller: User, pool: str, fqdn: str, *, now: datetime, sink: EventSink
) -> bool:
    """Put a system in the pool (admins); whether it changed anything."""
    require_admin(caller)
    changed = repo.access.add_to_pool(fqdn, pool, actor=caller.name, now=now)
    if changed:
        sink.post(AccessChanged())
    return changed


def remove_from_pool(
    repo: Repository, caller: User, pool: str, fqdn: str, *, now: datetime, sink: EventSink
) -> bool:
    """Take a system out of the pool (admins); whether it changed anything."""
    require_admin(caller)
    changed = repo.access.remove_from_pool(fqdn, pool, actor=caller.name, now=now)
    if changed:
        sink.post(AccessChanged())
    return changed


def set_rule(
    repo: Repository,
    caller: User,
    pool: str,
    group: str,
    max_priority: str,
    *,
    now: datetime,
    sink: EventSink,
) -> None:
    """Let ``group`` use the pool up to ``max_priority``, replacing its rule there (admins)."""
    require_admin(caller)
    repo.access.allow(pool, group, Priority.parse(max_priority), actor=caller.name, now=now)
    sink.post(AccessChanged())


def revoke_rule(
    repo: Repository, caller: User, pool: str, group: str, *, now: datetime, sink: EventSink
) -> bool:
    """Remove ``group``'s rule on the pool; the pool stays restricted (admins)."""
    require_admin(caller)
    changed = repo.access.revoke(pool, group, actor=caller.name, now=now)
    if changed:
        sink.post(AccessChanged())
    return changed
