"""EASY backfilling against the sets that hold systems (DESIGN.md § Backfill).

A set that is not holding may start on systems a higher-ranked holder needs only
if its declared maximum time ends before that holder's earliest possible start.
A set with no declared time never does.
"""

from __future__ import annotations

import math
from collections.abc import Set
from typing import TYPE_CHECKING

from labq.scheduler.entries import SetEntry

if TYPE_CHECKING:
    from labq.scheduler.core import Scheduler


def delays_a_holder(s: Scheduler, entry: SetEntry, lab: str, systems: set[str]) -> bool:
    """Whether starting ``entry`` on ``systems`` could push back a higher-ranked holder."""
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
        if s.now + entry.max_time > earliest_start(s, holder, lab, as_free=systems):
            return True
    return False


def earliest_start(
    s: Scheduler, holder: SetEntry, lab: str, as_free: Set[str] = frozenset()
) -> float:
    """The soonest the holder could have all its systems: the time enough of them can be free.

    A running set with a declared maximum time frees its system by its end; one
    without could end any moment, so it counts as free now (this is a lower
    bound, which keeps backfill from ever delaying the holder). Systems in
    ``as_free`` (the ones a backfill candidate would take) count as free now.
    """
    missing = len(holder.unplaced())
    times: list[float] = []
    seen: set[str] = set()
    for recipe in holder.unplaced():
        for fqdn in s.index.systems_of[recipe.klass]:
            system = s.systems[fqdn]
            if fqdn in seen or system.lab != lab or system.recipe in {r.id for r in holder.recipes}:
                continue
            if not s._usable(system, recipe, holder):
                continue
            seen.add(fqdn)
            times.append(s.now if fqdn in as_free else _free_at(s, system.recipe))
    if len(times) < missing:
        return math.inf
    times.sort()
    return times[missing - 1]


def _free_at(s: Scheduler, recipe_id: int | None) -> float:
    if recipe_id is None:
        return s.now
    other = s.sets[s.recipes[recipe_id].set_id]
    if other.max_time is None:
        return s.now
    begins = other.started_at if other.started_at is not None else s.now
    return max(s.now, begins + other.max_time)
