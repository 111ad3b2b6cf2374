"""What a waiting set may do with a lab's systems now: start, grow, move or hold.

A :class:`Choice` is a value: the core takes it (``Scheduler._take``) or not.
The :class:`Chooser` works choices out from the parts' state and changes
nothing of it (but the lock line, which learns who would only wait).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from labq.scheduler.admission import Admission
from labq.scheduler.backfill import Backfill
from labq.scheduler.books import Books
from labq.scheduler.entries import SetEntry, SystemEntry
from labq.scheduler.holds import Holds
from labq.scheduler.lockline import Keeper
from labq.scheduler.placement import Placer

Placement = Mapping[int, str]  # recipe id -> system


class ChoiceKind(enum.Enum):
    """How a set would take systems in a lab."""

    START = "start"  # the whole set starts now
    GROW = "grow"  # a holder in the lab takes one more system
    MOVE = "move"  # a holder elsewhere gives back what it holds and starts here
    HOLD = "hold"  # the set starts holding systems in the lab


@dataclass(frozen=True)
class Choice:
    """A set, what it would do in a lab, and with which systems."""

    kind: ChoiceKind
    entry: SetEntry
    placement: Placement


class Chooser:
    """Which choice a set has in a lab now, by the rules of docs/scheduling.md."""

    def __init__(
        self,
        books: Books,
        placer: Placer,
        admission: Admission,
        keeper: Keeper,
        backfill: Backfill,
        holds: Holds,
    ) -> None:
        self.books = books
        self.placer = placer
        self.admission = admission
        self.keeper = keeper
        self.backfill = backfill
        self.holds = holds

    def could_run_in(self, entry: SetEntry, lab: str) -> bool:
        """Whether the systems ``lab`` may use now could run the whole set once free."""
        return self.placer.could_run(lab, entry.demands(), entry.group)

    def consider(self, system: SystemEntry, entry: SetEntry, key: str, lab: str) -> Choice | None:
        """What a candidate for an offered system (through its recipe class ``key``) may do:
        grow with it, start (borrowing holders' spares), move here, or start holding."""
        if not entry.waiting or not entry.eligible:
            return None
        if entry.lab is not None and entry.lab != lab:
            return self.move(entry, lab)
        recipe = entry.open_recipe(key)
        if recipe is None or not self.placer.usable(system, key, entry.group):
            return None
        if entry.lab == lab:
            return Choice(ChoiceKind.GROW, entry, {recipe.id: system.fqdn})
        choice = self.start(entry, lab)
        if choice is not None:
            return choice
        if (
            self.holds.could_hold(entry, lab)
            and self.could_run_in(entry, lab)
            and self.keeper.reason(entry, lab) is None  # it would start only to wait
        ):
            return Choice(ChoiceKind.HOLD, entry, {recipe.id: system.fqdn})
        return None

    def start(self, entry: SetEntry, lab: str) -> Choice | None:
        """Start the whole set in ``lab`` now, if it fits and delays no higher-ranked holder."""
        if not self.admission.slot_free(lab):
            return None
        if self.keeper.still_kept(entry, lab):
            return None  # no need to look for systems: a long line is walked often
        placement = self._fit_now(entry, lab, every=False)
        if placement is None or self.backfill.delays(entry, lab, placement):
            return None
        if self.keeper.reason(entry, lab, keep=True) is not None:
            return None  # it would only wait for a lock: the slot goes to work that can run
        return Choice(ChoiceKind.START, entry, placement)

    def start_anywhere(self, entry: SetEntry, labs: list[str]) -> tuple[str, Choice] | None:
        """The first lab where the set starts now, preferring one where it needs no new VM."""
        first: tuple[str, Choice] | None = None
        for lab in labs:
            choice = self.start(entry, lab)
            if choice is None:
                continue
            if not self.books.virtual.intersection(choice.placement.values()):
                return lab, choice
            first = first or (lab, choice)
        return first

    def move(self, entry: SetEntry, lab: str) -> Choice | None:
        """A set holding elsewhere moves here when it can start here whole at once."""
        if not self.admission.slot_free(lab) or not self.could_run_in(entry, lab):
            return None
        placement = self._fit_now(entry, lab, every=True)
        if placement is None or self.backfill.delays(entry, lab, placement):
            return None
        if self.keeper.reason(entry, lab) is not None:
            return None
        return Choice(ChoiceKind.MOVE, entry, placement)

    def backfill_start(self, system: SystemEntry, first: SetEntry) -> Choice | None:
        """The best-ordered set that can start now and delays no reservation in the lab."""
        lab = system.lab
        found = self.backfill.search(system, first, lambda entry: self._fit_start(entry, lab))
        return None if found is None else Choice(ChoiceKind.START, found[0], dict(found[1]))

    def completes_with(self, entry: SetEntry, lab: str) -> bool:
        """Whether the set could start now with the lab's free systems (the offered one too)."""
        if entry.missing > self.books.available_count(lab):
            return False
        return len(self.placer.place(entry, lab, self.books.available(lab))) == entry.missing

    def best_hold(self, entry: SetEntry, labs: list[str]) -> tuple[str, Placement] | None:
        """The lab where the set would start soonest if it held there now, with what it holds."""
        options = []
        for lab in labs:
            if not self.holds.could_hold(entry, lab) or not self.could_run_in(entry, lab):
                continue
            placement = self.placer.place(entry, lab, self.books.available(lab))
            if placement:
                options.append((lab, placement))
        if len(options) < 2:
            return options[0] if options else None
        return min(
            options,
            key=lambda o: (self.backfill.reservation(entry, o[0]).start, -len(o[1]), o[0]),
        )

    def _fit_start(self, entry: SetEntry, lab: str) -> Placement | None:
        choice = self.start(entry, lab)
        return None if choice is None else choice.placement

    def _fit_now(self, entry: SetEntry, lab: str, *, every: bool) -> Placement | None:
        """A placement of the set on the lab's free systems, borrowing holders' spares if needed."""
        need = entry.width if every else entry.missing
        available = self.books.available(lab)
        if need <= len(available):
            placement = self.placer.place(entry, lab, available, every=every)
            if len(placement) == need:
                return placement
        spares = self._spares(lab, entry)
        if need > len(available) + len(spares):
            return None
        placement = self.placer.place(entry, lab, available | spares, every=every, avoid=spares)
        return placement if len(placement) == need else None

    def _spares(self, lab: str, borrower: SetEntry) -> set[str]:
        """Systems the lab's other holders hold (they may lend them, within the backfill rules)."""
        out: set[str] = set()
        for holder_id in self.books.holders[lab]:
            if holder_id != borrower.id:
                out |= self.books.sets[holder_id].held
        return out
