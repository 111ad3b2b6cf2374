"""EASY backfilling against the sets that hold systems (DESIGN.md § Backfill).

A set that is not holding may start on systems a higher-ranked holder needs only
if its declared maximum time ends before that holder's earliest possible start.
A set with no declared time never does.
"""

from __future__ import annotations

import math
from collections.abc import Set
from typing import TYPE_CHECKING, Any

from labq.scheduler.entries import SetEntry

if TYPE_CHECKING:
    from labq.scheduler.core import Scheduler


def delays_a_holder(
    s: Scheduler,
    entry: SetEntry,
    lab: str,
    systems: set[str],
    cache: dict[Any, Any] | None = None,
) -> bool:
    """Whether starting ``entry`` on ``systems`` could push back a higher-ranked holder.

    ``cache`` keeps each holder's free times for the length of one event.
    """
    mine = s.rank_of(entry)
    for holder_id in s.holders.get(lab, ()):
        holder = s.sets[holder_id]
        if holder_id == entry.id or s.rank_of(holder) <= mine:
            continue
        needed = {r.klass for r in holder.unplaced()}
        if not any(needed & s.index.classes_of.get(f, set()) for f in systems):
            continue
        if entry.max_time is None:
            return True
        if cache is None:
            cache = {}
        if holder_id not in cache:
            cache[holder_id] = free_times(s, holder, lab)
        start = start_given(cache[holder_id], len(holder.unplaced()), s.now, systems)
        if s.now + entry.max_time > start:
            return True
    return False


FreeTimes = list[tuple[float, str]]


def free_times(s: Scheduler, holder: SetEntry, lab: str) -> FreeTimes:
    """When each system the holder could still use becomes free, soonest first."""
    own = {r.id for r in holder.recipes}
    representatives = {r.klass: r for r in holder.unplaced()}  # one class accepts the same
    times: dict[str, float] = {}
    for key, recipe in representatives.items():
        for fqdn in s.index.systems_of[key]:
            system = s.systems[fqdn]
            if fqdn in times or system.lab != lab or system.recipe in own:
                continue
            if s._usable(system, recipe, holder):
                times[fqdn] = _free_at(s, system.recipe)
    return sorted((t, fqdn) for fqdn, t in times.items())


def start_given(times: FreeTimes, missing: int, now: float, as_free: Set[str]) -> float:
    """The ``missing``-th soonest free time, with ``as_free`` systems free now."""
    if len(times) < missing:
        return math.inf
    freed = sum(1 for _, fqdn in times if fqdn in as_free) if as_free else 0
    need = missing - freed
    if need <= 0:
        return now
    for t, fqdn in times:  # the need-th soonest of the others
        if fqdn in as_free:
            continue
        need -= 1
        if need == 0:
            return max(t, now)
    return math.inf


def _free_at(s: Scheduler, recipe_id: int | None) -> float:
    if recipe_id is None:
        return s.now
    other = s.sets[s.recipes[recipe_id].set_id]
    if other.max_time is None:
        return s.now
    begins = other.started_at if other.started_at is not None else s.now
    return max(s.now, begins + other.max_time)
