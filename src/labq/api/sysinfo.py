"""``/systems/summary`` (Slurm's ``sinfo``): per lab and pool, systems by state."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from labq.api.deps import StateDep, UserDep
from labq.api.openapi import answers
from labq.domain.summary import COLUMNS, summarise
from labq.store import reading

# registered before ``/systems/{fqdn}``, which would take "summary" for a name
router = APIRouter(prefix="/systems", tags=["systems"])


@router.get("/summary", responses=answers(404))
def systems_summary(state: StateDep, _: UserDep, lab: str | None = None) -> dict[str, Any]:
    """How many systems each lab (optionally one) and pool has idle, held, running, broken,
    manual and reserved; removed systems are left out."""
    with reading(state.engine) as repo:
        systems = repo.list_systems(lab=lab)
        reserved = frozenset(repo.open_reservations())
    return {"columns": ["total", *COLUMNS], "labs": summarise(systems, reserved)}
