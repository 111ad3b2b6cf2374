"""``/systems``: list (by lab, by pool), show, usage history; add, condition, inventory (admins)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import Field

from labq.api.openapi import answers
from labq.api.reservations import reservation_json
from labq.domain.inventory import InventoryError, parse_inventory
from labq.domain.model import System
from labq.domain.states import Condition
from labq.errors import InputError
from labq.gateway.deps import AdminDep, StateDep, UserDep
from labq.gateway.posting import committing
from labq.gateway.schemas import (
    INTEGRAL,
    NO_NUL,
    Attributes,
    Body,
    ConditionLabel,
    Name,
    Reason,
    Scalar,
)
from labq.store import epoch, reading
from labq.store.reservations import ReservationView
from labq.store.views import ActivityEntry
from labq.usecases import systems

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


Text = Annotated[str, Field(max_length=1000), NO_NUL]
Bytes = Annotated[int, Field(ge=0, le=2**63 - 1), INTEGRAL]


class DeviceBody(Body):
    """One device; every field is optional text."""

    bus: Text = ""
    driver: Text = ""
    vendor_id: Text = ""
    device_id: Text = ""
    subsys_vendor_id: Text = ""
    subsys_device_id: Text = ""
    type: Text = ""
    description: Text = ""


class DiskBody(Body):
    """One disk: its size in bytes, and optionally its sector sizes and model."""

    size: Bytes
    sector_size: Bytes = 0
    phys_sector_size: Bytes = 0
    model: Text = ""


class InventoryBody(Body):
    """What a system is made of; a key left out is unknown (``labq.domain.inventory``)."""

    devices: list[DeviceBody] = Field(default_factory=list, max_length=4096)
    disks: list[DiskBody] = Field(default_factory=list, max_length=4096)
    cpu_flags: list[Text] = Field(default_factory=list, max_length=4096)
    last_inventoried: Annotated[str, Field(max_length=64), NO_NUL] = ""  # ISO 8601 date(-time)


class SystemPatch(Body):
    """What to change on a system; a field left out stays as it is.

    ``inventory`` is replaced whole; ``attributes`` is merged (``null`` deletes a key).
    """

    inventory: InventoryBody | None = None
    lab: Name | None = None
    arch: Name | None = None
    attributes: Annotated[dict[Name, Scalar | None], Field(max_length=1000)] = Field(
        default_factory=dict
    )
    add_pools: Annotated[list[Name], Field(max_length=1000)] = Field(default_factory=list)
    remove_pools: Annotated[list[Name], Field(max_length=1000)] = Field(default_factory=list)


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


def change_json(entry: ActivityEntry) -> dict[str, Any]:
    """One change an admin (or the scheduler) made to a system (epoch seconds)."""
    return {
        "at": epoch(entry.at),
        "actor": entry.actor,
        "action": entry.action,
        "old": entry.old_value,
        "new": entry.new_value,
        "reason": entry.reason,
    }


@router.get("", responses=answers(404))
def list_systems(
    state: StateDep, _: UserDep, lab: str | None = None, pool: str | None = None
) -> dict[str, Any]:
    """Systems by fqdn, optionally only one lab's or one pool's."""
    with reading(state.engine) as repo:
        held = repo.reservations.open_reservations()
        return {
            "systems": [
                {**system_json(s), "reservation": _held(held.get(s.fqdn))}
                for s in repo.systems.list_systems(lab=lab, pool=pool)
            ]
        }


@router.get("/{fqdn}", responses=answers(404))
def show_system(fqdn: str, state: StateDep, _: UserDep) -> dict[str, Any]:
    """One system, with the reason its condition was last set."""
    with reading(state.engine) as repo:
        shown = system_json(repo.systems.get_system(fqdn), repo.systems.condition_reason(fqdn))
        return {**shown, "reservation": _held(repo.reservations.reservation_of(fqdn))}


def _held(found: ReservationView | None) -> dict[str, Any] | None:
    """The system's open reservation or loan (issue 14), None when it has none."""
    return None if found is None else reservation_json(found)


@router.get("/{fqdn}/history", responses=answers(404))
def usage_history(fqdn: str, state: StateDep, _: UserDep) -> dict[str, Any]:
    """Every usage and condition the system went through, oldest first (epoch seconds)."""
    with reading(state.engine) as repo:
        rows = repo.systems.usage_history(fqdn)
        changes = repo.system_edits.system_changes(fqdn)
    return {
        "fqdn": fqdn,
        "changes": [change_json(c) for c in changes],
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
    with committing(state) as (repo, sink):
        added, by_agent = systems.add_system(repo, admin, system, now=state.clock(), sink=sink)
    where = systems.runs_on(state.settings, added, by_agent=by_agent)
    return {**system_json(added), "runs_on": {"backend": where.backend, "note": where.note}}


@router.post("/{fqdn}/condition", responses=answers(404, 409))
def set_condition(
    fqdn: str, body: ConditionBody, state: StateDep, admin: AdminDep
) -> dict[str, Any]:
    """Change a system's condition, with a reason (admins)."""
    with committing(state) as (repo, sink):
        system, changed = systems.set_condition(
            repo,
            admin,
            fqdn,
            Condition(body.condition),
            reason=body.reason,
            now=state.clock(),
            sink=sink,
        )
    return {**system_json(system, body.reason), "changed": changed}


@router.patch("/{fqdn}", responses=answers(404, 409, 422))
def change_system(fqdn: str, body: SystemPatch, state: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Change a system (admins): its inventory, lab, arch, attributes or pools; the
    scheduler re-reads which jobs it suits. ``changed``: whether anything did,
    ``fields``: what."""
    inventory = None
    if body.inventory is not None:
        try:  # fields left out stay unknown, so only what was sent counts
            inventory = parse_inventory(body.inventory.model_dump(exclude_unset=True))
        except InventoryError as exc:
            raise InputError(exc.problem, place=exc.path) from None
    edits = body.model_dump(exclude={"inventory"}, exclude_defaults=True)
    with committing(state) as (repo, sink):
        system, fields = systems.change_system(
            repo, admin, fqdn, inventory=inventory, edits=edits, now=state.clock(), sink=sink
        )
    return {**system_json(system), "changed": bool(fields), "fields": fields}
