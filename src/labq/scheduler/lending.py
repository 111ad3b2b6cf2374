"""Lending held systems to backfill candidates.

A holder's systems sit idle until the holder can start. A set that can start
now and is declared to end before the holder's earliest possible start may
borrow them: the holder loses nothing, since it could not have started sooner.
Each holder keeps one system, so it keeps its hold (and its slot).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from labq.scheduler.backfill import free_times, start_given
from labq.scheduler.entries import SetEntry

if TYPE_CHECKING:
    from labq.scheduler.core import Scheduler


def lendable(s: Scheduler, borrower: SetEntry, lab: str, cache: dict[Any, Any]) -> set[str]:
    """Systems the lab's holders hold but would not miss while ``borrower`` runs."""
    if borrower.max_time is None:
        return set()
    ends = s.now + borrower.max_time
    out: set[str] = set()
    for holder_id, spare in spares(s, lab, cache).items():
        if holder_id != borrower.id and ends <= _start(s, holder_id, lab, cache):
            out.update(spare)
    return out


def spares(s: Scheduler, lab: str, cache: dict[Any, Any]) -> dict[int, list[str]]:
    """Per holder of the lab, the systems it could lend at most (cheap; once per event)."""
    key = ("spares", lab)
    if key not in cache:
        found: dict[int, list[str]] = {}
        for holder_id in sorted(s.holders.get(lab, ())):
            held = sorted(r.system for r in s.sets[holder_id].placed() if r.system is not None)
            if len(held) >= 2:  # it keeps one system, so it keeps its hold
                found[holder_id] = held[1:]
        cache[key] = found
    result: dict[int, list[str]] = cache[key]
    return result


def _start(s: Scheduler, holder_id: int, lab: str, cache: dict[Any, Any]) -> float:
    key = ("start", holder_id)
    if key not in cache:
        holder = s.sets[holder_id]
        if holder_id not in cache:
            cache[holder_id] = free_times(s, holder, lab)
        cache[key] = start_given(cache[holder_id], len(holder.unplaced()), s.now, frozenset())
    start: float = cache[key]
    return start
