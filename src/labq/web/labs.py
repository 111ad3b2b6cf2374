"""Labs and pools: each lab's systems by condition and usage; each pool's systems and rules.

The pools and their access rules are read by the use case behind ``GET /pools``, so
the page says exactly what the API says: an unrestricted pool is open to every
group; a restricted one only to the groups its rules name, each up to a maximum
effective priority (seed 002).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from fastapi import APIRouter, Request, Response

from labq.gateway.deps import StateDep
from labq.store import reading
from labq.usecases.pools import pool_access
from labq.web.rendering import page
from labq.web.route import PageRoute
from labq.web.session import SessionDep

router = APIRouter(route_class=PageRoute, include_in_schema=False)


@dataclass(frozen=True)
class LabSummary:
    """A lab and how its systems stand."""

    name: str
    systems: int
    conditions: Counter[str]
    usages: Counter[str]


@router.get("/labs")
def labs_page(request: Request, app: StateDep, session: SessionDep) -> Response:
    """Every lab with its systems' conditions and usage; every pool with its rules."""
    with reading(app.engine) as repo:
        names = repo.systems.list_labs()
        systems = repo.systems.list_systems()
        pools = pool_access(repo)
    labs = [
        LabSummary(
            name=name,
            systems=sum(1 for s in systems if s.lab == name),
            conditions=Counter(s.condition.value for s in systems if s.lab == name),
            usages=Counter(s.usage.value for s in systems if s.lab == name),
        )
        for name in names
    ]
    return page(request, "labs.html", title="Labs and pools", nav="labs", labs=labs, pools=pools)
