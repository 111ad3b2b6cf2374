"""EASY backfilling against the sets that hold systems (DESIGN.md § Backfill).

A holder's reservation (:mod:`labq.scheduler.reservation`) is its soonest
start in its lab; a lower-ranked set may start now only if it delays no
reservation: it ends by the reserved start (rule 1), or it takes only systems
the holder will not need then (rule 2).

:class:`Backfill` keeps what a search needs between events:

- the *shelf* (the waitlist's): waiting sets in a queue shaped by width and
  declared time, so a search looks only at sets that could fit the room the
  reservations leave (:class:`~labq.scheduler.index.Window`) instead of walking
  the queue;
- each holder's reservation, worked out once per change of its lab (not once
  per candidate);
- the last search that found nothing per lab and system kind: the next system
  offered in the same state, with no more room, skips the search.

Both memos are checked against stamps from :class:`~labq.scheduler.freshness.Freshness`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping

from labq.domain.model import AccessPolicy
from labq.scheduler.books import Books
from labq.scheduler.entries import SchedulerConfig, SetEntry, SystemEntry
from labq.scheduler.freshness import Freshness, Stamped
from labq.scheduler.index import ClassIndex, Window
from labq.scheduler.placement import Placer
from labq.scheduler.profile import Profile
from labq.scheduler.reservation import NEVER, Reservation, reserve
from labq.scheduler.waitlist import Waitlist

Placement = Mapping[int, str]  # recipe id -> system
Fit = Callable[[SetEntry], Placement | None]  # a placement to start the set now, if any
Protected = list[tuple[SetEntry, Reservation]]


class Backfill:
    """Reservations of the holders, and the search for sets that may start before them."""

    def __init__(
        self,
        books: Books,
        placer: Placer,
        profile: Profile,
        index: ClassIndex,
        policy: AccessPolicy,
        config: SchedulerConfig,
        waitlist: Waitlist,
        fresh: Freshness,
    ) -> None:
        self.books = books
        self.placer = placer
        self.profile = profile
        self.index = index
        self.policy = policy
        self.config = config
        self.shelf = waitlist.shelf
        self._fresh = fresh
        self._reserved: Stamped[tuple[int, str], Reservation] = fresh.stamped()
        self._misses: Stamped[Hashable, Window] = fresh.stamped()

    def forget(self, set_id: int, lab: str) -> None:
        """The set holds no more in ``lab``: drop its reservation."""
        self._reserved.forget((set_id, lab))

    def reservation(self, entry: SetEntry, lab: str) -> Reservation:
        """The set's soonest start in ``lab`` as a holder there (worked out once per change)."""
        books = self.books
        above = self._above(entry, lab)
        # systems held by higher-ranked holders are not the set's to count on; the others
        # (free, its own, lower holders') all count as free now, wherever they are
        stamp = self._fresh.reservation_stamp(lab, books.now, tuple(h.id for h in above))
        known = self._reserved.get((entry.id, lab), stamp)
        if known is not None:
            return known
        blocked: set[str] = set().union(*(h.held for h in above))
        demands = entry.demands()
        pools = {k: self.placer.pool(lab, k, entry.group) for k in demands}
        found = reserve(demands, pools, blocked, self.profile, lab, books.now)
        self._reserved.put((entry.id, lab), stamp, found)
        return found

    def delays(self, entry: SetEntry, lab: str, placement: Placement) -> bool:
        """Whether starting ``entry`` on ``placement`` pushes back a higher-ranked holder."""
        protected = [(h, self.reservation(h, lab)) for h in self._above(entry, lab)]
        return self._delays_any(protected, entry, placement)

    def search(
        self, system: SystemEntry, first: SetEntry, fit: Fit
    ) -> tuple[SetEntry, Placement] | None:
        """The best-ordered set that can start now (``fit``) and delays no reservation.

        ``first`` is the set the system would otherwise go to, a holder (or a set
        that would start holding) that cannot start yet: it is protected too.
        """
        lab = system.lab
        protected = self._protected(lab, first)
        window = self._window(lab, protected)
        classes = self.index.classes_of.get(system.fqdn, set())
        where = (lab, tuple(sorted(classes)), system.pools)
        stamp = self._fresh.search_stamp(lab, self.books.now)
        missed = self._misses.get(where, stamp)
        if missed is not None and window.within(missed):
            return None
        books = self.books
        candidates = self.shelf.candidates(
            system, classes, books.sets, self.policy, books.now, self.config, window
        )
        tries = 0
        try:
            for entry, key in candidates:
                if entry.lab is not None or not entry.waiting or not entry.eligible:
                    continue  # holders grow and complete on their own
                if entry.id == first.id or not self.placer.usable(system, key, entry.group):
                    continue
                placement = fit(entry)
                if placement is not None and not self._delays_any(protected, entry, placement):
                    return entry, placement
                tries += 1
                if tries >= self.config.backfill_depth:
                    return None  # not a miss: the search stopped early
        finally:
            candidates.close()
        self._misses.put(where, stamp, window)
        return None

    def _above(self, entry: SetEntry, lab: str) -> list[SetEntry]:
        books = self.books
        mine = books.rank_of(entry)
        holders = (books.sets[h] for h in sorted(books.holders[lab]) if h != entry.id)
        return [h for h in holders if books.rank_of(h) > mine]

    def _protected(self, lab: str, first: SetEntry) -> Protected:
        """The lab's holders, and ``first`` if it would start holding."""
        books = self.books
        holders = [books.sets[h] for h in sorted(books.holders[lab])]
        if first.id not in books.holders[lab]:
            holders.append(first)
        return [(h, self.reservation(h, lab)) for h in holders]

    def _delays_any(self, protected: Protected, entry: SetEntry, placement: Placement) -> bool:
        end = NEVER if entry.busy_for is None else self.books.now + entry.busy_for
        taken = set(placement.values())
        return any(
            holder.id != entry.id and reservation.delays(end, taken)
            for holder, reservation in protected
        )

    def _window(self, lab: str, protected: Protected) -> Window:
        """The room a backfill has: free systems and holders' (lendable) ones, before the
        soonest reserved start (rule 1), or beside what the reserved sets need (rule 2).
        A bound: each candidate is checked exactly."""
        books = self.books
        free = books.available(lab)
        lendable = {h: len(books.sets[h].held) for h in books.holders[lab]}
        room = len(free) + sum(lendable.values())
        time, extra = NEVER, room
        for holder, reservation in protected:
            outside = sum(1 for f in free if f not in reservation.pool)
            outside += sum(n for h, n in lendable.items() if h != holder.id)
            time = min(time, reservation.start - books.now)
            extra = min(extra, reservation.extra + outside)
        return Window(room, time, extra)
