"""Accounting (Slurm's ``sacct``/``sreport``): per user, group, pool or lab, system-hours
used, jobs run, recipes ended and passed, pass rate and mean wait, over a window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Final

from labq.domain.accounting import By, UsageRow, report
from labq.errors import RequestError
from labq.store import Repository

DEFAULT_SPAN: Final = timedelta(days=30)
MAX_SPAN: Final = timedelta(days=3660)


def window(
    since: datetime | None, until: datetime | None, now: datetime
) -> tuple[datetime, datetime]:
    """A report's interval: ``until`` (default now) and ``since`` (default 30 days before);
    a time without a zone is UTC. Refused when it is empty or longer than ten years."""
    end = _utc(until) if until is not None else now
    start = _utc(since) if since is not None else end - DEFAULT_SPAN
    if start >= end:
        raise RequestError("since must come before until", place="since")
    if end - start > MAX_SPAN:
        raise RequestError("a usage report covers at most ten years", place="since")
    return start, end


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def usage_report(repo: Repository, by: By, start: datetime, end: datetime) -> list[UsageRow]:
    """The rows for one window."""
    found = repo.accounting.accounting_records(start, end)
    return report(by, found.served, found.busy, found.ended, found.started, found.pools)
