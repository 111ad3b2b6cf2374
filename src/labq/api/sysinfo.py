"""``/systems/summary`` (Slurm's ``sinfo``): per lab and pool, systems by state; and
``/systems/properties``: the properties host requirements can ask for."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from labq.api.deps import StateDep, UserDep
from labq.api.openapi import answers
from labq.domain.shortfall import BUILTIN, recorded
from labq.domain.summary import COLUMNS, summarise
from labq.store import reading

# registered before ``/systems/{fqdn}``, which would take "summary" for a name
router = APIRouter(prefix="/systems", tags=["systems"])


@router.get("/summary", responses=answers(404))
def systems_summary(state: StateDep, _: UserDep, lab: str | None = None) -> dict[str, Any]:
    """How many systems each lab (optionally one) and pool has idle, held, running, broken,
    manual and reserved; removed systems are left out."""
    with reading(state.engine) as repo:
        systems = repo.systems.list_systems(lab=lab)
        reserved = frozenset(repo.reservations.open_reservations())
    return {"columns": ["total", *COLUMNS], "labs": summarise(systems, reserved)}


@router.get("/properties")
def system_properties(state: StateDep, _: UserDep) -> dict[str, Any]:
    """The properties at least one system records (``recorded``), and those labq gives every
    system (``builtin``): a host requirement on any other can match no system.
    ``labq validate`` warns about them."""
    with reading(state.engine) as repo:
        known = recorded(s.facts() for s in repo.systems.list_systems())
    return {"recorded": sorted(known), "builtin": sorted(BUILTIN)}
