"""``/usage``: accounting (Slurm's ``sacct``/``sreport``) — per user, group, pool or lab:
system-hours used, jobs run, recipes ended and passed, pass rate and mean wait."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from labq.api.openapi import answers
from labq.domain.accounting import By
from labq.gateway.answers import usage_row_json
from labq.gateway.deps import StateDep, UserDep
from labq.gateway.schemas import IsoTime
from labq.store import reading
from labq.usecases.usage import usage_report, window

router = APIRouter(prefix="/usage", tags=["usage"])


@router.get("", responses=answers(422))
def get_usage(
    state: StateDep,
    _: UserDep,
    by: Annotated[By, Query(description="what each row is")] = "group",
    since: Annotated[
        IsoTime | None, Query(description="start (ISO 8601; default 30 days ago)")
    ] = None,
    until: Annotated[IsoTime | None, Query(description="end (ISO 8601; default now)")] = None,
) -> dict[str, Any]:
    """System-hours used, jobs run, pass rate and mean wait per user, group, pool or lab."""
    start, end = window(since, until, state.clock())
    with reading(state.engine) as repo:
        rows = usage_report(repo, by, start, end)
    return {
        "by": by,
        "since": start,
        "until": end,
        "rows": [usage_row_json(r) for r in rows],
    }
