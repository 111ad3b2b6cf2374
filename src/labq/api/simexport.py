"""``/sim/export``: the lab's own history as a ``labq sim`` scenario (admins)."""

from __future__ import annotations

from typing import Annotated

import yaml
from fastapi import APIRouter, Query, Response

from labq.api.openapi import answers
from labq.gateway.deps import AdminDep, StateDep
from labq.gateway.schemas import IsoTime, Name
from labq.sim.export import export_scenario
from labq.store import reading
from labq.usecases.usage import window

router = APIRouter(prefix="/sim", tags=["sim"])
YAML = "application/yaml"


@router.get(
    "/export",
    response_class=Response,
    responses={200: {"content": {YAML: {}}, "description": "a scenario"}, **answers(403, 422)},
)
def export(
    state: StateDep,
    _: AdminDep,
    since: Annotated[
        IsoTime | None, Query(description="start (ISO 8601; default 30 days ago)")
    ] = None,
    until: Annotated[IsoTime | None, Query(description="end (ISO 8601; default now)")] = None,
    # [] rather than None: FastAPI copies it per request, and the schema is a plain array
    lab: Annotated[list[Name], Query(description="only these labs (repeat)")] = [],  # noqa: B006
    anonymise: bool = False,
) -> Response:
    """Every job submitted in the window with its measured durations and outcomes, the labs,
    pools, systems and their condition changes: a scenario for ``labq sim``."""
    start, end = window(since, until, state.clock())
    with reading(state.engine) as repo:
        data = export_scenario(
            repo, state.settings, since=start, until=end, labs=lab or (), anonymise=anonymise
        )
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    return Response(text, media_type=YAML)
