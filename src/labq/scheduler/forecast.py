"""When each waiting set should start and end, and each running set end: the forecasts.

Worked out from what the core already keeps, not from a new look at the
systems: the free-time profile gives when each busy system is planned to be
free (its set's start plus its plan: a prediction with ``backfill_on_predictions``,
else ``max_time``), and a holder's start is its reservation (memoised per change
of its lab). Waiting sets that hold nothing are projected in global rank order,
each taking the soonest-free systems of its pools in the lab where it would
start first, as if no set backfilled past it (so the forecast is a bound, not a
promise, and with one class exact under EASY's rules).

Cost of one call: the profile's ends per lab, then for each waiting set the
systems of its pools sorted by free time — O(W · S log S) for W waiting sets and
S systems of their pools; no database, no clock. Several classes of one set are
counted together (a bound: a matching could need later systems).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from labq.scheduler.backfill import Backfill
from labq.scheduler.books import Books
from labq.scheduler.entries import SetEntry
from labq.scheduler.placement import Placer
from labq.scheduler.profile import COULD_END_NOW, Profile
from labq.scheduler.reservation import NEVER

NOT_KNOWN = math.inf  # a start or an end nothing lets the core foresee


@dataclass(frozen=True)
class Forecast:
    """A set's forecast start and end (``NOT_KNOWN``: none), and the run time planned."""

    start: float
    end: float
    prediction: float | None  # seconds: the plan (prediction or max_time); None: neither


def forecasts(
    books: Books,
    profile: Profile,
    placer: Placer,
    backfill: Backfill,
    waiting: set[int],
    now: float,
) -> dict[int, Forecast]:
    """Every running set's and every waiting set's (``waiting``: their ids) forecast at
    ``now`` (ranked as at the core's last event)."""
    out: dict[int, Forecast] = {}
    free_at: dict[str, dict[str, float]] = {}
    for lab in books.free:
        times = free_at[lab] = dict.fromkeys(books.available(lab), now)
        for end, fqdn in profile.ends(lab):
            times[fqdn] = now if end == COULD_END_NOW else max(now, end)
            _running(books, fqdn, out, now)
        for holder in books.holders[lab]:
            times.update(dict.fromkeys(books.sets[holder].held, now))
    entries = [books.sets[i] for i in waiting]
    live = [e for e in entries if e.waiting]
    for entry in sorted(live, key=books.rank_of, reverse=True):
        found = _reserved(entry, backfill, now) or _projected(entry, placer, free_at)
        if found is None:
            out[entry.id] = Forecast(NOT_KNOWN, NOT_KNOWN, entry.plan)
            continue
        lab, start = found
        end = NOT_KNOWN if entry.plan is None else start + entry.plan
        _take(entry, placer, free_at[lab], lab, start, end)
        out[entry.id] = Forecast(start, end, entry.plan)
    return out


def _running(books: Books, fqdn: str, out: dict[int, Forecast], now: float) -> None:
    recipe = books.systems[fqdn].recipe
    if recipe is None:
        return
    entry = books.sets[books.recipes[recipe].set_id]
    if entry.id in out or entry.started_at is None:
        return
    end = NOT_KNOWN if entry.plan is None else max(now, entry.started_at + entry.plan)
    out[entry.id] = Forecast(entry.started_at, end, entry.plan)


def _reserved(entry: SetEntry, backfill: Backfill, now: float) -> tuple[str, float] | None:
    """A holder's start is its reservation."""
    if entry.lab is None or entry.id not in backfill.books.holders[entry.lab]:
        return None
    start = backfill.reservation(entry, entry.lab).start
    return None if start == NEVER else (entry.lab, max(now, start))


def _pool(entry: SetEntry, placer: Placer, lab: str) -> set[str]:
    return set().union(*(placer.pool(lab, k, entry.group) for k in entry.demands()))


def _projected(
    entry: SetEntry, placer: Placer, free_at: Mapping[str, Mapping[str, float]]
) -> tuple[str, float] | None:
    """The lab where the set's width-th soonest free system of its pools is soonest."""
    best: tuple[str, float] | None = None
    for lab, times in free_at.items():
        if not placer.could_run(lab, entry.demands(), entry.group):
            continue
        ready = sorted(times[f] for f in _pool(entry, placer, lab) if f in times)
        if len(ready) < entry.width or ready[entry.width - 1] == NOT_KNOWN:
            continue
        start = ready[entry.width - 1]
        if best is None or start < best[1]:
            best = (lab, start)
    return best


def _take(
    entry: SetEntry, placer: Placer, times: dict[str, float], lab: str, start: float, end: float
) -> None:
    """The set occupies the soonest-free systems of its pools from ``start`` to ``end``."""
    pool = sorted((times[f], f) for f in _pool(entry, placer, lab) if f in times)
    for _at, fqdn in pool[: entry.width]:
        times[fqdn] = end
