"""``/usage``: accounting (Slurm's ``sacct``/``sreport``) — per user, group, pool or lab:
system-hours used, jobs run, recipes ended and passed, pass rate and mean wait."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Final

from fastapi import APIRouter, Query

from labq.api.deps import StateDep, UserDep
from labq.api.errors import ApiError
from labq.api.openapi import answers
from labq.api.schemas import IsoTime
from labq.domain.accounting import By, UsageRow, report
from labq.store import reading

router = APIRouter(prefix="/usage", tags=["usage"])
DEFAULT_SPAN: Final = timedelta(days=30)
MAX_SPAN: Final = timedelta(days=3660)


def window(
    since: datetime | None, until: datetime | None, now: datetime
) -> tuple[datetime, datetime]:
    """The report's interval: ``until`` (default now) and ``since`` (default 30 days before);
    a time without a zone is UTC. 422 when it is empty or longer than ten years."""
    end = _utc(until) if until is not None else now
    start = _utc(since) if since is not None else end - DEFAULT_SPAN
    if start >= end:
        raise ApiError(422, "since must come before until", place="since")
    if end - start > MAX_SPAN:
        raise ApiError(422, "a usage report covers at most ten years", place="since")
    return start, end


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def row_json(row: UsageRow) -> dict[str, Any]:
    """One row as the API shows it."""
    return {
        "key": row.key,
        "system_hours": round(row.system_hours, 6),
        "jobs": row.jobs,
        "recipes": row.recipes,
        "passed": row.passed,
        "pass_rate": None if row.pass_rate is None else round(row.pass_rate, 4),
        "mean_wait_s": None if row.mean_wait_s is None else round(row.mean_wait_s, 1),
    }


def usage_report(state: StateDep, by: By, start: datetime, end: datetime) -> list[UsageRow]:
    """The rows for one window (shared with the UI page)."""
    with reading(state.engine) as repo:
        found = repo.accounting.accounting_records(start, end)
    return report(by, found.served, found.busy, found.ended, found.started, found.pools)


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
    rows = usage_report(state, by, start, end)
    return {
        "by": by,
        "since": start,
        "until": end,
        "rows": [row_json(r) for r in rows],
    }
