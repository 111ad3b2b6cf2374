"""``/systems``: list (by lab, by pool), show, usage history; add, condition, inventory (admins)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import Field

from labq.api.deps import AdminDep, StateDep, UserDep
from labq.api.events import tell
from labq.api.openapi import answers
from labq.api.schemas import Attributes, Body, ConditionLabel, Name, Reason
from labq.domain.inventory import InventoryError, parse_inventory
from labq.domain.model import System
from labq.domain.states import Condition
from labq.errors import InputError
from labq.store import reading, transaction

router = APIRouter(prefix="/systems", tags=["systems"])


class SystemBody(Body):
    """A new system; its lab, owner and pools must exist."""

    fqdn: Name
    lab: Name
    arch: Name = "x86_64"
    attributes: Attributes = Field(default_factory=dict)
    pools: list[Name] = Field(default_factory=list)
    owner: Name | None = None
    condition: ConditionLabel = "automated"


class SystemPatch(Body):
    """What to change on a system: its inventory (``labq.domain.inventory``), replaced whole."""

    inventory: dict[str, Any]


class ConditionBody(Body):
    """A new condition, and why."""

    condition: ConditionLabel
    reason: Reason | None = None


def system_json(system: System, reason: str | None = None) -> dict[str, Any]:
    """A system as the API shows it."""
    out: dict[str, Any] = {
        "fqdn": system.fqdn,
        "lab": system.lab,
        "arch": system.arch,
        "attributes": system.attributes,
        "inventory": system.inventory.to_json(),
        "pools": sorted(system.pools),
        "owner": system.owner,
        "condition": system.condition.value,
        "usage": system.usage.value,
        "recipe": system.recipe,
    }
    if reason is not None:
        out["condition_reason"] = reason
    return out


@router.get("", responses=answers(404))
def list_systems(
    state: StateDep, _: UserDep, lab: str | None = None, pool: str | None = None
) -> dict[str, Any]:
    """Systems by fqdn, optionally only one lab's or one pool's."""
    with reading(state.engine) as repo:
        return {"systems": [system_json(s) for s in repo.list_systems(lab=lab, pool=pool)]}


@router.get("/{fqdn}", responses=answers(404))
def show_system(fqdn: str, state: StateDep, _: UserDep) -> dict[str, Any]:
    """One system, with the reason its condition was last set."""
    with reading(state.engine) as repo:
        return system_json(repo.get_system(fqdn), repo.condition_reason(fqdn))


@router.get("/{fqdn}/history", responses=answers(404))
def usage_history(fqdn: str, state: StateDep, _: UserDep) -> dict[str, Any]:
    """Every usage and condition the system went through, oldest first (epoch seconds)."""
    with reading(state.engine) as repo:
        rows = repo.usage_history(fqdn)
    return {
        "fqdn": fqdn,
        "history": [
            {
                "usage": r.usage.value,
                "condition": r.condition.value,
                "recipe": r.recipe,
                "start": r.start,
                "end": r.end,
            }
            for r in rows
        ],
    }


@router.post("", status_code=201, responses=answers(404, 409))
def add_system(body: SystemBody, state: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Add a system (admins); automated systems become pending for the scheduler."""
    system = System(
        fqdn=body.fqdn,
        lab=body.lab,
        arch=body.arch,
        attributes=dict(body.attributes),
        pools=frozenset(body.pools),
        owner=body.owner,
        condition=Condition(body.condition),
    )
    with transaction(state.engine) as repo:
        repo.add_system(system, actor=admin.name, now=state.clock())
        added = repo.get_system(body.fqdn)
    tell(lambda: state.events.system_added(body.fqdn))
    return system_json(added)


@router.post("/{fqdn}/condition", responses=answers(404, 409))
def set_condition(
    fqdn: str, body: ConditionBody, state: StateDep, admin: AdminDep
) -> dict[str, Any]:
    """Change a system's condition, with a reason (admins)."""
    with transaction(state.engine) as repo:
        changed = repo.set_condition(
            fqdn, Condition(body.condition), now=state.clock(), actor=admin.name, reason=body.reason
        )
        system = repo.get_system(fqdn)
    if changed:
        tell(lambda: state.events.condition_changed(fqdn))
    return {**system_json(system, body.reason), "changed": changed}


@router.patch("/{fqdn}", responses=answers(404, 422))
def change_system(fqdn: str, body: SystemPatch, state: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Replace a system's inventory (admins); the scheduler re-reads which jobs it suits."""
    try:
        inventory = parse_inventory(body.inventory)
    except InventoryError as exc:
        raise InputError(exc.problem, place=exc.path) from None
    with transaction(state.engine) as repo:
        changed = repo.set_inventory(fqdn, inventory, actor=admin.name, now=state.clock())
        system = repo.get_system(fqdn)
    if changed:  # its facts changed, so may the classes it meets: as a pool change does
        tell(state.events.access_changed)
    return {**system_json(system), "changed": changed}
