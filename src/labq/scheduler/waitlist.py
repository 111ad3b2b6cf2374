"""The waiting sets as offers walk them: the queue per class, the backfill shelf, the demand.

Every waiting set sits in two queues (:class:`~labq.scheduler.index.Queue`):
the queue an offered system walks in its order, and the *shelf*, the same sets
shaped by width and declared time for the backfill search. The demand counts,
per class, the waiting sets with a recipe of it: placement gives a set the
systems the fewest waiting sets could use.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from labq.scheduler.entries import SetEntry
from labq.scheduler.freshness import Freshness
from labq.scheduler.index import Queue


class Waitlist:
    """The queue and the shelf of waiting sets, and the demand per class."""

    def __init__(self, fresh: Freshness) -> None:
        self._fresh = fresh
        self.queue = Queue(fresh)  # what an offered system walks, best first
        self.shelf = Queue(fresh, shaped=True)  # the backfill search's candidates
        self._demand: Counter[str] = Counter()  # class -> waiting sets with a recipe of it

    @property
    def demand(self) -> Mapping[str, int]:
        """Per class, how many waiting sets have a recipe of it."""
        return self._demand

    def join(self, entry: SetEntry) -> None:
        """A new set waits: it counts as demand for its classes."""
        self._demand.update({r.klass for r in entry.recipes})

    def leave(self, entry: SetEntry) -> None:
        """The set stops waiting (it started or ended): it no longer counts as demand."""
        self._demand.subtract({r.klass for r in entry.recipes})

    def requeue(self, entry: SetEntry, klass: str) -> None:
        """A waiting set's recipe of ``klass`` needs a system: (re)join both queues."""
        self.queue.push(entry, klass)
        if self.shelf.push(entry, klass):
            self._fresh.shelf_grew()

    def requeue_all(self, entry: SetEntry) -> None:
        """(Re)join the queues for every class the set still needs a system of."""
        for key in {r.klass for r in entry.unplaced()}:
            self.requeue(entry, key)

    def reorder(self, entry: SetEntry) -> None:
        """The set's place in the queue changed: its old items are stale, it rejoins."""
        self._fresh.reorder(entry.id)
        self.requeue_all(entry)
