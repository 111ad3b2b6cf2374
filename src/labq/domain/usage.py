"""The usage history of systems and the utilisation computed from it (seed 000).

Every change of a system's usage or condition closes the system's open row and
opens a new one. Times are seconds on whatever clock the caller keeps (the
service's wall clock, the simulator's virtual one).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from labq.domain.states import Condition, Usage

BUSY: Final = frozenset({Usage.SCHEDULED, Usage.WAITING, Usage.INSTALLING, Usage.RUNNING})


@dataclass(slots=True)
class UsageRecord:
    """One stretch of time a system spent in one usage and condition.

    Only :class:`UsageHistory` ends an open row (in place: it is recorded for
    every usage change); everyone else treats rows as values.
    """

    system: str
    usage: Usage
    condition: Condition
    recipe: int | None
    start: float
    end: float | None = None  # None while it is the system's current row

    def closed(self, at: float) -> UsageRecord:
        """This row, ended at ``at``."""
        return UsageRecord(self.system, self.usage, self.condition, self.recipe, self.start, at)


class UsageHistory:
    """An append-only list of usage rows with each system's open row at hand."""

    def __init__(self) -> None:
        self.rows: list[UsageRecord] = []
        self._open: dict[str, UsageRecord] = {}

    def record(
        self, system: str, usage: Usage, condition: Condition, recipe: int | None, now: float
    ) -> UsageRecord:
        """Close the system's open row at ``now`` and open one for its new state.

        A ``now`` before the open row's start (another process's clock a little
        ahead of the caller's) closes that row where it started: changes keep the
        order they were made in, and history never goes back.
        """
        current = self._open.get(system)
        if current is not None:
            now = max(now, current.start)
            current.end = now
        row = UsageRecord(system, usage, condition, recipe, now)
        self._open[system] = row
        self.rows.append(row)
        return row

    def of(self, system: str) -> list[UsageRecord]:
        """Every row of one system, oldest first."""
        return [r for r in self.rows if r.system == system]


def time_in_usage(
    rows: Iterable[UsageRecord], start: float, end: float, *, now: float | None = None
) -> dict[Usage, float]:
    """Seconds spent in each usage within ``[start, end)``, summed over the rows.

    An open row counts up to ``now`` (or ``end`` when ``now`` is not given).
    """
    totals = dict.fromkeys(Usage, 0.0)
    for row in rows:
        row_end = row.end if row.end is not None else (end if now is None else now)
        overlap = min(row_end, end) - max(row.start, start)
        if overlap > 0:
            totals[row.usage] += overlap
    return totals


def utilisation(
    rows: Iterable[UsageRecord],
    start: float,
    end: float,
    *,
    busy: frozenset[Usage] = BUSY,
    now: float | None = None,
) -> float:
    """The share of recorded time within ``[start, end)`` spent in a busy usage.

    Works for one system's rows or a whole pool's: time a system has no row for
    (before it was added) counts neither as busy nor as available.
    """
    totals = time_in_usage(rows, start, end, now=now)
    recorded = sum(totals.values())
    if recorded <= 0:
        return 0.0
    return sum(totals[u] for u in busy) / recorded
