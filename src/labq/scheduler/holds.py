"""Holds without deadlock (DESIGN.md § No deadlock, no starvation).

A set that cannot start yet may hold systems in one lab, so a wide set is not
starved by a stream of narrow ones. Holds are ranked by one global order,
``(aged nominal priority, submit time, id)``, which does not depend on any
system: a higher-ranked set may take a held system from a lower-ranked one
(wound-wait), and after every gain the lab's holders are tried best rank
first. So no cycle of sets waiting on each other can form.

A holder keeps its place and its reservation while lower-ranked sets borrow
its systems within the backfill rules; it leaves the holders when a
higher-ranked set takes the last system it held, when it is released, or when
it starts. Which holder may start is said here (:meth:`Holds.completing`); the
core starts it.
"""

from __future__ import annotations

from collections.abc import Mapping

from labq.domain.states import RecipeState
from labq.scheduler import decisions as d
from labq.scheduler.admission import Admission
from labq.scheduler.backfill import Backfill
from labq.scheduler.books import Books
from labq.scheduler.entries import SetEntry
from labq.scheduler.freshness import Freshness
from labq.scheduler.placement import Placer

Placement = Mapping[int, str]  # recipe id -> system


class Holds:
    """The holders of every lab: who may hold, what they take, and when they complete."""

    def __init__(
        self,
        books: Books,
        placer: Placer,
        backfill: Backfill,
        admission: Admission,
        fresh: Freshness,
    ) -> None:
        self.books = books
        self.placer = placer
        self.backfill = backfill
        self.admission = admission
        self._fresh = fresh
        self.slots = books.config.holds_per_lab

    def could_hold(self, entry: SetEntry, lab: str) -> bool:
        """A hold slot is free in ``lab``, or the set outranks a holder there."""
        if not self.admission.slot_free(lab):
            return False  # no new holds where nothing may start: the set may go elsewhere
        holders = self.books.holders[lab]
        if len(holders) < self.slots:
            return True
        rank_of, sets = self.books.rank_of, self.books.sets
        return any(rank_of(sets[h]) < rank_of(entry) for h in holders)

    def may_hold(self, entry: SetEntry, lab: str) -> bool:
        """A free hold slot, or a lower-ranked holder whose slot this set then takes."""
        books = self.books
        holders = books.holders[lab]
        if len(holders) < self.slots:
            return True
        if not holders:
            return False
        lowest = min(holders, key=lambda h: books.rank_of(books.sets[h]))
        if books.rank_of(books.sets[lowest]) >= books.rank_of(entry):
            return False
        self.unhold(books.sets[lowest], f"its hold slot went to higher-ranked set {entry.id}")
        return True

    def hold(self, entry: SetEntry, lab: str, placement: Placement) -> None:
        """Make the set a holder in ``lab`` with these systems; its other recipes are assigned.

        The lab's holders may complete now (:meth:`completing`).
        """
        books = self.books
        books.add_holder(entry, lab)
        entry.held_since = books.now
        self.bind(entry, lab, placement)
        more = self.placer.place(entry, lab, books.available(lab))
        if more:
            self.bind(entry, lab, more)
        for recipe in entry.recipes:
            if recipe.system is None and recipe.state is not RecipeState.ASSIGNED:
                recipe.state = RecipeState.ASSIGNED
                books.emit(d.Assign(recipe.id, entry.id))

    def bind(self, entry: SetEntry, lab: str, placement: Placement) -> None:
        """Give the set these systems, taking them from holders (lent or by wound-wait)."""
        books = self.books
        entry.lab = lab
        grew = entry.id in books.holders[lab] and bool(entry.held)
        for recipe_id, fqdn in placement.items():
            system = books.systems[fqdn]
            if system.recipe is not None:
                victim = books.recipes[system.recipe]
                owner = books.sets[victim.set_id]
                grew = False
                if books.rank_of(owner) > books.rank_of(entry):
                    # lent: the holder keeps its place and reservation, even holding nothing
                    reason = f"lent to set {entry.id}, which does not delay this set"
                    books.take_back(victim, reason)
                else:
                    books.take_back(victim, f"taken by higher-ranked set {entry.id}")
                    self.settle(owner)
            books.give(entry, books.recipes[recipe_id], fqdn)
        if not grew:  # a holder growing with free systems it could lend anyway: the same room
            self._fresh.holds_moved(lab)

    def unhold(self, entry: SetEntry, reason: str) -> None:
        """Give back everything a holder holds; its recipes go back to the queue."""
        for recipe in entry.placed():
            self.books.take_back(recipe, reason)
        self.settle(entry)

    def settle(self, entry: SetEntry) -> None:
        """A holder left with no system (not by lending) is a holder no more: back to the queue."""
        if entry.held or entry.lab is None or entry.started or entry.finished:
            return
        self.forget(entry)
        entry.lab = None
        entry.held_since = None
        for recipe in entry.recipes:
            if recipe.state is RecipeState.ASSIGNED:
                recipe.state = RecipeState.QUEUED
                self.books.emit(d.Enqueue(recipe.id, entry.id))

    def forget(self, entry: SetEntry) -> None:
        """The set is no holder any more (it started, ended or let go): its slot opens."""
        lab = entry.lab
        if lab is not None and self.books.drop_holder(entry):
            self.backfill.forget(entry.id, lab)
            self.books.admit(lab)

    def completing(self, lab: str) -> SetEntry | None:
        """The best-ranked holder that completes now from free systems and lower holders'
        holds, its systems rearranged to start (None: none may, or none can).

        The core starts it, then asks again: holders complete best rank first.
        """
        if not self.admission.slot_free(lab):
            return None
        return self._complete_one(lab)

    def _complete_one(self, lab: str) -> SetEntry | None:
        books = self.books
        ranked = sorted(books.holders[lab], key=lambda h: books.rank_of(books.sets[h]))
        ranked.reverse()
        free = books.available_count(lab)
        for position, holder_id in enumerate(ranked):
            holder = books.sets[holder_id]
            lower = [books.sets[h] for h in ranked[position + 1 :]]
            if free + sum(len(h.held) for h in lower) < holder.missing:
                continue  # cannot complete: skip the matching
            pool = books.available(lab).union(holder.held, *(h.held for h in lower))
            placement = self.placer.place(holder, lab, pool, every=True)
            if len(placement) < holder.width:
                continue
            # starting turns holds into running systems nobody can take back:
            # the same backfill rule as for any set applies against better holders
            if self.backfill.delays(holder, lab, placement):
                continue
            self._rearrange(holder, lab, placement)
            return holder
        return None

    def _rearrange(self, entry: SetEntry, lab: str, placement: Placement) -> None:
        """Let go of own holds the new placement moves elsewhere, then take the new ones."""
        books = self.books
        for recipe in entry.placed():
            if placement.get(recipe.id) != recipe.system:
                books.take_back(recipe, "rearranged within its own set")
        moved = {rid: f for rid, f in placement.items() if books.recipes[rid].system != f}
        if moved:
            self.bind(entry, lab, moved)
