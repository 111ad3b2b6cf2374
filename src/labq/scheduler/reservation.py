"""Reservations: when a holder could start at the soonest, and what backfill may not touch.

EASY backfilling (Lifka 1995) protects the head of the queue with a
reservation at its *shadow time*: the soonest moment enough of its systems are
declared free. A lower-ranked set may start now if it obeys one of two rules:

1. it is declared to end by the reserved start, or
2. it uses only systems the reserved set will not need at its start — systems
   free by then beyond what it needs (the *extra* ones).

Either way the reserved start does not move later. A set without a declared
maximum time can only use rule 2.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

from labq.scheduler.placement import gang_match, is_complete
from labq.scheduler.profile import Profile

NEVER = math.inf


@dataclass(frozen=True)
class Reservation:
    """A holder's soonest start in its lab, and the room it leaves."""

    start: float  # NEVER: not with the systems the lab has now
    pool: Set[str]  # the lab's systems the holder could use
    extra: int  # systems of ``pool`` free by ``start`` beyond the holder's need
    demands: Mapping[str, int]  # recipes per class (all of the holder's)
    # several classes: per class, the systems free by ``start`` (rule 2 needs a matching)
    options: Mapping[str, Sequence[str]] | None = None

    def delays(self, end: float, taken: Set[str]) -> bool:
        """Whether a set declared to end at ``end`` on ``taken`` (free now) pushes it back."""
        if end != NEVER and end <= self.start:
            return False  # rule 1: it is gone by then
        used = sum(1 for fqdn in taken if fqdn in self.pool)
        if not used:
            return False
        if self.options is None:
            return used > self.extra  # rule 2, one class: enough are left
        left = {k: [f for f in systems if f not in taken] for k, systems in self.options.items()}
        return not is_complete(self.demands, gang_match(self.demands, left))


def reserve(
    demands: Mapping[str, int],
    pools: Mapping[str, frozenset[str]],
    blocked: Set[str],
    profile: Profile,
    lab: str,
    now: float,
) -> Reservation:
    """The soonest start in ``lab`` of a set needing ``demands`` systems per class.

    ``pools`` are the systems of the lab each class may use. A system of a pool
    is free for the holder now unless it runs a set (the profile says until
    when) or is ``blocked`` (held by a higher-ranked holder: never, as far as
    this reservation knows).
    """
    if len(demands) == 1:
        ((klass, need),) = demands.items()
        return _one_class(demands, need, pools[klass], blocked, profile, lab, now)
    return _several_classes(demands, pools, blocked, profile, lab, now)


def _one_class(
    demands: Mapping[str, int],
    need: int,
    pool: frozenset[str],
    blocked: Set[str],
    profile: Profile,
    lab: str,
    now: float,
) -> Reservation:
    """Counting is enough: the ``need``-th soonest free time of the pool."""
    # blocked systems are held, never busy: the two do not overlap
    got = len(pool) - len(pool & profile.busy_in(lab)) - len(pool & blocked)
    start = now if got >= need else NEVER
    for end, fqdn in profile.ends(lab):
        if fqdn not in pool:
            continue
        at = max(now, end)
        if at > start:
            break
        got += 1
        if start == NEVER and got >= need:
            start = at
    return Reservation(start, pool, max(0, got - need), demands)


def _several_classes(
    demands: Mapping[str, int],
    pools: Mapping[str, Set[str]],
    blocked: Set[str],
    profile: Profile,
    lab: str,
    now: float,
) -> Reservation:
    """The soonest of the profile's times by which a matching places every recipe."""
    union: set[str] = set().union(*pools.values())
    times = {f: profile.free_at(f, now) for f in union if f not in blocked}
    moments = sorted(set(times.values()))
    found = NEVER
    low, high = 0, len(moments) - 1
    while low <= high:  # placeable by a moment stays placeable later: binary search
        middle = (low + high) // 2
        if _placeable(demands, pools, times, moments[middle]):
            found, high = moments[middle], middle - 1
        else:
            low = middle + 1
    options = _ready_by(pools, times, found)
    ready = sum(1 for t in times.values() if t <= found)
    extra = max(0, ready - sum(demands.values()))
    return Reservation(found, frozenset(union), extra, demands, options)


def _placeable(
    demands: Mapping[str, int], pools: Mapping[str, Set[str]], times: Mapping[str, float], at: float
) -> bool:
    return is_complete(demands, gang_match(demands, _ready_by(pools, times, at)))


def _ready_by(
    pools: Mapping[str, Set[str]], times: Mapping[str, float], at: float
) -> dict[str, list[str]]:
    """Per class, the systems of its pool free by ``at``, by name."""
    return {k: sorted(f for f in pool if times.get(f, NEVER) <= at) for k, pool in pools.items()}
