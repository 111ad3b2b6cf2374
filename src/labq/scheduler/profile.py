"""The free-time profile: when each busy system of a lab is declared to be free again.

A set that starts occupies its systems until its start plus its declared
``max_time``; a set without one could end any moment. The profile is kept up
to date as sets start and end, so a reservation walks the soonest ends of one
lab instead of looking at every running set for every backfill candidate.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence, Set

from labq.scheduler.freshness import Freshness

COULD_END_NOW = -math.inf  # the end of a set without max_time: any moment

End = tuple[float, str]  # (declared end, fqdn)
_NONE: frozenset[str] = frozenset()


class Profile:
    """Per lab, the systems that run a started set, soonest declared end first."""

    def __init__(self, fresh: Freshness) -> None:
        self._fresh = fresh  # reservations worked out from a lab's profile go stale with it
        self._ends: dict[str, list[End]] = {}  # lab -> sorted (end, fqdn)
        self._end_of: dict[str, tuple[str, float]] = {}  # fqdn -> (lab, end)
        self._busy: dict[str, set[str]] = {}  # lab -> its busy systems

    def occupy(self, lab: str, fqdns: Iterable[str], end: float | None) -> None:
        """A set started on ``fqdns``; ``end`` is its declared end (None: it could end now)."""
        value = COULD_END_NOW if end is None else end
        ends = self._ends.setdefault(lab, [])
        busy = self._busy.setdefault(lab, set())
        for fqdn in fqdns:
            if fqdn in self._end_of:
                raise ValueError(f"{fqdn} already runs a set")
            bisect.insort(ends, (value, fqdn))
            self._end_of[fqdn] = (lab, value)
            busy.add(fqdn)
        self._fresh.profile_moved(lab)

    def vacate(self, fqdns: Iterable[str]) -> None:
        """The set running on ``fqdns`` ended (systems not in the profile are ignored)."""
        for fqdn in fqdns:
            found = self._end_of.pop(fqdn, None)
            if found is None:
                continue
            lab, value = found
            ends = self._ends[lab]
            del ends[bisect.bisect_left(ends, (value, fqdn))]
            self._busy[lab].discard(fqdn)
            self._fresh.profile_moved(lab)

    def overdue(self, lab: str, now: float) -> list[str]:
        """The lab's busy systems planned to be free before ``now`` (not those that could end
        any moment): a cost of log n plus what it returns."""
        ends = self._ends.get(lab, [])
        at = bisect.bisect_right(ends, (COULD_END_NOW, "\U0010ffff"))
        found = []
        while at < len(ends) and ends[at][0] < now:
            found.append(ends[at][1])
            at += 1
        return found

    def ends(self, lab: str) -> Sequence[End]:
        """The lab's busy systems with their declared ends, soonest first (do not change it)."""
        return self._ends.get(lab, [])

    def busy(self, fqdn: str) -> bool:
        """Whether the system runs a started set."""
        return fqdn in self._end_of

    def busy_in(self, lab: str) -> Set[str]:
        """The lab's systems that run a started set (do not change it)."""
        return self._busy.get(lab, _NONE)

    def free_at(self, fqdn: str, now: float) -> float:
        """When the system is declared free: now if it runs nothing or could end now."""
        found = self._end_of.get(fqdn)
        return now if found is None else max(now, found[1])

    def snapshot(self) -> dict[str, float]:
        """Every busy system and its declared end (what a recomputation must equal)."""
        return {fqdn: end for fqdn, (_lab, end) in self._end_of.items()}
