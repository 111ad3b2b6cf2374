"""EASY backfilling against the sets that hold systems (DESIGN.md § Backfill).

:class:`Backfill` keeps what a backfill search needs between events:

- the *shelf*: waiting sets in a queue shaped by width and declared time, so a
  search looks only at sets that could fit the room a reservation leaves
  (:class:`~labq.scheduler.index.Window`) instead of walking the queue;
- each holder's :class:`~labq.scheduler.reservation.Reservation`, worked out
  once per change of its lab (not once per candidate);
- the last search that found nothing per lab: the next system offered in the
  same state, with no more room, skips the search.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

from labq.scheduler.entries import SetEntry
from labq.scheduler.index import Queue, Window
from labq.scheduler.reservation import Reservation

Stamp = tuple[Hashable, ...]  # what a remembered result depends on


@dataclass
class _Miss:
    stamp: Stamp
    window: Window


class Backfill:
    """The shelf of backfill candidates, holders' reservations, and searches that failed."""

    def __init__(self) -> None:
        self.shelf = Queue(shaped=True)
        self._reserved: dict[tuple[int, str], tuple[Stamp, Reservation]] = {}
        self._misses: dict[Hashable, _Miss] = {}

    def add(self, entry: SetEntry, klass: str) -> None:
        """A waiting set (re)joins the queue with a recipe of ``klass``."""
        self.shelf.push(entry, klass)

    def reservation(
        self, holder: SetEntry, lab: str, stamp: Stamp, compute: Callable[[], Reservation]
    ) -> Reservation:
        """The holder's reservation in ``lab``, worked out again only when ``stamp`` changed."""
        key = (holder.id, lab)
        known = self._reserved.get(key)
        if known is not None and known[0] == stamp:
            return known[1]
        found = compute()
        self._reserved[key] = (stamp, found)
        return found

    def forget(self, set_id: int, lab: str) -> None:
        """The set holds no more in ``lab``: drop its reservation."""
        self._reserved.pop((set_id, lab), None)

    def missed(self, where: Hashable, stamp: Stamp, window: Window) -> bool:
        """Whether a search at ``where`` in the same state, with as much room, found nothing."""
        miss = self._misses.get(where)
        return miss is not None and miss.stamp == stamp and window.within(miss.window)

    def miss(self, where: Hashable, stamp: Stamp, window: Window) -> None:
        """Remember that a search found nothing (the stamp includes the shelf's version)."""
        self._misses[where] = _Miss(stamp, window)
