"""The time series behind the charts, read from the database.

- utilisation per pool or lab: the busy share (``scheduled`` … ``running``) of the
  time recorded in the usage history, per bucket — the rule of
  :func:`labq.domain.usage.utilisation` and of ``repo.systems.utilisation``;
- the queue: how many recipe sets were queued (submitted, not yet started, not
  ended) at the end of each bucket, and the mean wait of the sets that started
  in it or still wait at its end, from each set's ``submitted_at`` /
  ``started_at`` / ``finished_at`` — the times its recipes' moves stamped (the
  recipe history has the same moves);
- a timeline of systems from the usage history, for the Gantt chart.

Each function is one read transaction and a few queries, whatever the number of
systems or buckets; the arithmetic is done here, in memory.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from sqlalchemy import Engine

from labq.domain.states import Condition
from labq.domain.usage import BUSY, UsageRecord, time_in_usage
from labq.errors import NotFoundError
from labq.store import Repository, epoch, reading
from labq.web.charts import GanttRow, GanttSpan, Series, span_of, utc

ALL = "all"  # the one series when there is nothing to split by


def utilisation_over_time(
    engine: Engine,
    *,
    by: Literal["pool", "lab"],
    start: datetime,
    end: datetime,
    buckets: int = 48,
    now: datetime | None = None,
) -> list[Series]:
    """One series per pool (its current members) or lab: the busy share in each bucket.

    A point sits in the middle of its bucket; a bucket in which none of the
    group's systems has recorded time (before they were added) has no point.
    Open history rows count up to ``now``, or to each bucket's end without it.
    """
    lo, hi = _interval(start, end, buckets)
    with reading(engine) as repo:
        systems = repo.systems.list_systems()
        rows = _usage_rows(repo, start, end)
    groups: dict[str, list[str]] = {
        s.fqdn: (sorted(s.pools) if by == "pool" else [s.lab]) for s in systems
    }
    width = (hi - lo) / buckets
    until = None if now is None else epoch(now)
    per: dict[str, list[list[UsageRecord]]] = {
        g: [[] for _ in range(buckets)] for names in groups.values() for g in names
    }
    for row in rows:
        row_end = row.end if row.end is not None else (hi if until is None else until)
        first = max(0, math.floor((row.start - lo) / width))
        last = min(buckets - 1, math.ceil((row_end - lo) / width) - 1)
        for group in groups.get(row.system, ()):
            for index in range(first, last + 1):
                per[group][index].append(row)
    out = []
    for group in sorted(per):
        points = []
        for index, bucket_rows in enumerate(per[group]):
            b0, b1 = lo + index * width, lo + (index + 1) * width
            totals = time_in_usage(bucket_rows, b0, b1, now=until)
            recorded = sum(totals.values())
            if recorded > 0:
                points.append(((b0 + b1) / 2, sum(totals[u] for u in BUSY) / recorded))
        out.append(Series(group, tuple(points)))
    return out


def queue_over_time(
    engine: Engine, *, start: datetime, end: datetime, buckets: int = 48
) -> tuple[list[Series], list[Series]]:
    """``(queue length, mean wait)``, one series each, named ``all``, a point at each bucket's end.

    Queue length: sets submitted and neither started nor ended at the bucket's
    end (retry clones count from when they were made). Mean wait: over the sets
    that started in the bucket (submission to start) and those still waiting at
    its end (submission to then), so a queue that does not move shows a wait
    that grows; a bucket with neither has no point. A queued set belongs to no
    lab until it holds systems, and the database keeps no history of holds, so
    the queue is not split by lab.
    """
    lo, hi = _interval(start, end, buckets)
    with reading(engine) as repo:
        sets = repo.figures.queue_stays(start, end)
    # (submitted, when it left the queue: it started, or ended without starting; None: not yet)
    stays = [
        (
            epoch(s.submitted_at),
            None if (left := s.started_at or s.finished_at) is None else epoch(left),
            s.started_at is not None,
        )
        for s in sets
    ]
    submitted = sorted(s for s, _, _ in stays)
    gone = sorted(g for _, g, _ in stays if g is not None)
    width = (hi - lo) / buckets
    queued, waits = [], []
    for index in range(buckets):
        b0, at = lo + index * width, lo + (index + 1) * width
        queued.append((at, float(bisect_right(submitted, at) - bisect_right(gone, at))))
        waited = [
            (at if g is None or g > at else g) - s
            for s, g, began in stays
            if s <= at and (g is None or g > at or (began and b0 < g))
        ]
        if waited:
            waits.append((at, sum(waited) / len(waited)))
    return [Series(ALL, tuple(queued))], [Series(ALL, tuple(waits))]


def system_timeline(
    engine: Engine,
    *,
    start: datetime,
    end: datetime,
    fqdns: Sequence[str] | None = None,
) -> list[GanttRow]:
    """One row per system (all by fqdn, or those of ``fqdns`` in that order), from its history.

    Spans are clipped to ``[start, end]``; an open row runs to ``end``. Each
    tooltip names the usage, the condition when not automated, the recipe, and
    the row's own times. An unknown fqdn is a :class:`NotFoundError`.
    """
    lo, hi = _interval(start, end, 1)
    with reading(engine) as repo:
        known = [s.fqdn for s in repo.systems.list_systems()]
        if fqdns is None:
            chosen = known
        else:
            chosen = list(dict.fromkeys(fqdns))
            missing = sorted(set(chosen) - set(known))
            if missing:
                raise NotFoundError(f"no system named {', '.join(map(repr, missing))}")
        rows = _usage_rows(repo, start, end, None if fqdns is None else chosen)
    spans: dict[str, list[GanttSpan]] = defaultdict(list)
    for row in rows:
        s, e = max(row.start, lo), min(hi if row.end is None else row.end, hi)
        if e > s:
            spans[row.system].append(GanttSpan(s, e, row.usage.value, _tooltip(row)))
    return [GanttRow(fqdn, tuple(spans[fqdn])) for fqdn in chosen]


def _tooltip(row: UsageRecord) -> str:
    what = f"{row.system}: {row.usage.value}"
    if row.condition is not Condition.AUTOMATED:
        what += f" ({row.condition.value})"
    if row.recipe is not None:
        what += f", recipe {row.recipe}"
    if row.end is None:
        return f"{what}\nsince {utc(row.start)}"
    return f"{what}\n{utc(row.start)} – {utc(row.end)} ({span_of(row.end - row.start)})"


def _interval(start: datetime, end: datetime, buckets: int) -> tuple[float, float]:
    if buckets < 1:
        raise ValueError(f"buckets must be at least 1, not {buckets}")
    lo, hi = epoch(start), epoch(end)
    if hi <= lo:
        raise ValueError(f"the interval ends ({end}) before it starts ({start})")
    return lo, hi


def _usage_rows(
    repo: Repository, start: datetime, end: datetime, fqdns: Sequence[str] | None = None
) -> list[UsageRecord]:
    """History rows that overlap ``[start, end)``."""
    return repo.systems.usage_between(start, end, fqdns)
