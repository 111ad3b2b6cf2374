"""``/labs``: list (everyone), add (admins)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from labq.api.openapi import answers
from labq.gateway.deps import AdminDep, StateDep, UserDep
from labq.gateway.schemas import NameBody
from labq.store import reading, transaction
from labq.usecases import labs

router = APIRouter(prefix="/labs", tags=["labs"])


@router.get("")
def list_labs(state: StateDep, _: UserDep) -> dict[str, Any]:
    """Every lab's name."""
    with reading(state.engine) as repo:
        return {"labs": [{"name": name} for name in repo.systems.list_labs()]}


@router.post("", status_code=201, responses=answers(409))
def add_lab(body: NameBody, state: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Add a lab (admins)."""
    with transaction(state.engine) as repo:
        lab_id = labs.add_lab(repo, admin, body.name, now=state.clock())
    return {"id": lab_id, "name": body.name}
