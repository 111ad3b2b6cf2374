"""What running sets weigh on waiting ones: running slots, bucket throttles, predictive weights.

Every set that starts or ends is counted here (seed 004's queue controls and
its predictive queue):

- its running slot and its rate-limit buckets (:class:`Admission`): a bucket
  that fills throttles its waiting sets, one that empties lets them go;
- what it locks (:class:`RunningLocks`): the static predictive value (spv) of
  the waiting sets that declare locks changes with it;
- the lock line (:class:`Keeper`): sets kept queued for a lock go once it is
  let go.

A waiting set whose eligibility or spv changes is re-keyed in the waitlist;
labs where a set may now start have their idle systems offered again; a holder
that may not run now gives back what it holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from labq.domain.locktable import Grant
from labq.scheduler.admission import Admission
from labq.scheduler.books import Books
from labq.scheduler.entries import Eligibility, SchedulerConfig, SetEntry
from labq.scheduler.freshness import Freshness
from labq.scheduler.holds import Holds
from labq.scheduler.lockline import Keeper
from labq.scheduler.predictive import RunningLocks, declared, held
from labq.scheduler.waitlist import Waitlist


class Weights:
    """The counts of running sets and the spv and throttle of waiting sets, kept together."""

    def __init__(
        self,
        config: SchedulerConfig,
        books: Books,
        waitlist: Waitlist,
        holds: Holds,
        admission: Admission,
        running_locks: RunningLocks,
        keeper: Keeper,
        fresh: Freshness,
    ) -> None:
        self.config = config
        self.books = books
        self.waitlist = waitlist
        self.holds = holds
        self.admission = admission
        self.running_locks = running_locks
        self.keeper = keeper
        self._fresh = fresh
        self._declaring: set[int] = set()  # waiting sets whose spv depends on running sets

    # --- waiting sets -----------------------------------------------------------------

    def joined(self, entry: SetEntry) -> None:
        """A new set waits: its spv against the running sets now, its buckets, its throttle."""
        entry.spv = self.spv_of(entry)
        if entry.locks.levels and not entry.locks.whole_lab:
            self._declaring.add(entry.id)
        self.admission.join(entry)
        entry.throttle = self.admission.throttle_of(entry)

    def left(self, entry: SetEntry) -> None:
        """A waiting set ended without starting (finished, cancelled or aborted)."""
        self._declaring.discard(entry.id)
        self.admission.leave(entry)
        self._left_waiting(entry)

    def reconsidered(self, entry: SetEntry, eligibility: Eligibility) -> None:
        """Dependencies or filters changed what blocks the waiting set, or its buckets."""
        was = entry.eligible
        self.admission.leave(entry)
        entry.blocked = eligibility.blocked
        entry.buckets = eligibility.buckets
        self.admission.join(entry)
        entry.throttle = self.admission.throttle_of(entry)
        self._eligibility_changed(entry, was)

    def spv_of(self, entry: SetEntry) -> float:
        """The seed's spv, or 0 for a set the keeper says goes first (see ``lockline``)."""
        if self.keeper.weighs_nothing(entry):
            return 0.0
        return self.running_locks.spv(entry.locks, self.config.spv_base)

    # --- running sets -----------------------------------------------------------------

    def started(self, entry: SetEntry, lab: str) -> None:
        """A set takes a running slot; its buckets may fill, its locks weigh on others."""
        buckets, weighs = self.count_running(entry, lab)
        self._rethrottle(buckets)
        if weighs:
            self._refresh_spv()

    def count_running(
        self, entry: SetEntry, lab: str, grants: Sequence[Grant] | None = None
    ) -> tuple[set[str], bool]:
        """Count a started set (its slot, buckets, locks): (its buckets, whether spv may change).

        No decisions: a restore counts the sets it finds running this way too.
        """
        self._declaring.discard(entry.id)
        return self.admission.started(entry, lab), self._weigh(entry, grants)

    def locks_held(self, entry: SetEntry, grants: Sequence[Grant] | None) -> None:
        """The lock service says what a running set really holds (None: its declaration)."""
        if self._weigh(entry, grants):
            self._refresh_spv()

    def finished(self, entry: SetEntry, lab: str) -> None:
        """A started set ended: its slot, buckets and locks are free."""
        buckets, reopened = self.admission.finished(entry, lab)
        if reopened is None:
            self.books.reopen_all()
        else:
            self.books.reopen_labs(reopened)
        self._rethrottle(buckets)
        weighed = self.running_locks.remove(entry.id)
        if self.keeper.uncount(entry.id):
            self._lock_freed()
        if weighed:
            self._refresh_spv()

    def recount(self, held: Mapping[int, Sequence[Grant]]) -> None:
        """Running slots, buckets, running locks and waiting sets' spv, as events leave them."""
        for entry in self.books.sets.values():
            if entry.started and not entry.finished and entry.lab is not None:
                self.count_running(entry, entry.lab, held.get(entry.id))
        for entry in self.books.sets.values():
            if entry.waiting:
                throttle = self.admission.throttle_of(entry)
                if throttle != entry.throttle:
                    entry.throttle = throttle
                    self._fresh.reorder(entry.id)  # pushed while it looked eligible
        self._refresh_spv()

    # --- what follows -----------------------------------------------------------------

    def _weigh(self, entry: SetEntry, grants: Sequence[Grant] | None) -> bool:
        """Count what a running set locks: what it holds, else what it declared; changed?"""
        levels = self.config.lock_levels
        if grants:
            changed = self.running_locks.put(entry.id, held(grants, levels, entry.locks))
        else:
            changed = self.running_locks.put(entry.id, declared(entry.locks, levels))
        assert entry.lab is not None  # it runs
        if self.keeper.count(entry, entry.lab, grants or ()):
            self._lock_freed()
        self._rekey(self.keeper.taken_again())
        return changed

    def _lock_freed(self) -> None:
        """A lock was let go: sets kept for it may start, first, on idle systems too."""
        due, gone = self.keeper.freed()
        self._rekey(due)
        if gone:  # else every kept set still waits, and everyone behind them
            self.books.reopen_all()

    def _rekey(self, set_ids: Iterable[int]) -> None:
        """The sets' spv may have changed (they became due, or stopped being): re-key them."""
        for set_id in set_ids:
            self._respv(self.books.sets[set_id])

    def _refresh_spv(self) -> None:
        """The running sets changed: re-key the waiting sets whose spv changed with them."""
        for set_id in sorted(self._declaring):
            entry = self.books.sets[set_id]
            if not entry.waiting:
                self._declaring.discard(set_id)
                continue
            self._respv(entry)

    def _respv(self, entry: SetEntry) -> None:
        value = self.spv_of(entry)
        if value != entry.spv:
            entry.spv = value
            self.waitlist.reorder(entry)

    def _left_waiting(self, entry: SetEntry) -> None:
        """The set stopped waiting: sets kept in line behind it may go now."""
        if self.keeper.left(entry):
            self.books.reopen_all()

    def _rethrottle(self, buckets: Iterable[str]) -> None:
        for bucket in sorted(buckets):
            for set_id in sorted(self.admission.members.get(bucket, ())):
                entry = self.books.sets[set_id]
                was = entry.eligible
                entry.throttle = self.admission.throttle_of(entry)
                self._eligibility_changed(entry, was)

    def _eligibility_changed(self, entry: SetEntry, was: bool) -> None:
        """Take an ineligible set out of the running; put an eligible one back."""
        if entry.eligible == was:
            return
        if not entry.eligible:
            self._fresh.reorder(entry.id)  # its heap items go stale
            self._left_waiting(entry)
            if entry.lab is not None and not entry.started:
                # what keeps it, in the words of Scheduler.waits_for: a block, else its bucket
                why = entry.blocked if entry.blocked is not None else entry.throttle
                self.holds.unhold(entry, f"it may not run now: {why}")
            return
        self.waitlist.reorder(entry)
        self.books.reopen_all()
