"""Sets joining and leaving the core, systems joining, and restoring after a restart.

Every way a set comes onto the books — submitted, heard of only after it
ended, or restored from storage — goes through one registration, so its
recipes get the same viability classes and it waits in the same queues
whichever way it came. A set leaves through :meth:`Roster.retire` alone,
so no part keeps counting a set that ended.

Restoring (:meth:`Roster.restore`) fills a fresh core from what storage says,
refusing an impossible state with the checks of :mod:`labq.scheduler.restore`;
it decides nothing, since the database already holds every decision.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from labq.domain.locktable import Grant
from labq.domain.states import Condition
from labq.scheduler.books import Books
from labq.scheduler.entries import (
    RecipeEntry,
    SetEntry,
    SetSubmission,
    SystemEntry,
    ViabilityClass,
    set_entry,
)
from labq.scheduler.holds import Holds
from labq.scheduler.index import ClassIndex
from labq.scheduler.profile import Profile
from labq.scheduler.restore import RestoredSet, check_place, check_recipes
from labq.scheduler.waitlist import Waitlist
from labq.scheduler.weights import Weights


class Roster:
    """Who is on the books: sets join and leave, systems join, a restart restores both."""

    def __init__(
        self,
        books: Books,
        index: ClassIndex,
        waitlist: Waitlist,
        weights: Weights,
        holds: Holds,
        profile: Profile,
    ) -> None:
        self._books = books
        self._index = index
        self._waitlist = waitlist
        self._weights = weights
        self._holds = holds
        self._profile = profile

    def add_system(self, system: SystemEntry) -> None:
        """A system joins the books and the classes it meets (nothing is offered yet)."""
        self._books.add_system(system)
        self._index.add_system(system)

    def recipes_of(self, submission: SetSubmission) -> list[RecipeEntry]:
        """The set's recipes, each with its viability class (registered once in the index)."""
        recipes = []
        # a wide set repeats one
        keys: dict[tuple[int, frozenset[str], str | None, object], str] = {}
        for index, spec in enumerate(submission.recipes):
            same = (id(spec.requirement), spec.excluded, spec.force, spec.distro)
            key = keys.get(same)
            if key is None:
                klass = ViabilityClass(spec.requirement, spec.excluded, spec.force, spec.distro)
                key = keys[same] = self._index.add_class(klass)
            recipes.append(RecipeEntry(spec.id, submission.id, index, key, spec.role))
        return recipes

    def register(self, submission: SetSubmission) -> SetEntry:
        """A new set joins the books and waits in the queues of its classes."""
        if submission.id in self._books.sets:
            raise ValueError(f"recipe set {submission.id} is already known")
        on = self._books.config.backfill_on_predictions
        entry = set_entry(submission, self.recipes_of(submission), on)
        self._books.add_set(entry)
        self._waitlist.join(entry)
        self._weights.joined(entry)
        self._waitlist.requeue_all(entry)
        return entry

    def retire(self, entry: SetEntry) -> None:
        """The set ended (finished, cancelled or aborted): it waits and holds no more."""
        if entry.waiting:
            self._waitlist.leave(entry)
            self._weights.left(entry)
        entry.finished = True
        self._holds.forget(entry)

    # --- restoring after a restart ----------------------------------------------------

    def restore(
        self,
        systems: Iterable[SystemEntry],
        sets: Iterable[RestoredSet],
        held: Mapping[int, Sequence[Grant]],
    ) -> None:
        """Fill fresh books with systems and sets in their places, deciding nothing."""
        if self._books.systems or self._books.sets:
            raise ValueError("restore needs a fresh scheduler")
        for system in systems:
            if system.fqdn in self._books.systems:
                raise ValueError(f"system {system.fqdn} is listed twice")
            self.add_system(system)
        for restored in sets:
            self._restore_set(restored)
        for fqdn, system in self._books.systems.items():
            if system.recipe is None and system.condition is not Condition.REMOVED:
                self._books.set_free(fqdn)
        self._weights.recount(held)

    def _restore_set(self, restored: RestoredSet) -> None:
        """A set registers as if submitted, then takes the place storage says it had: its
        recipes' systems, and running (in the profile) or holding in that lab."""
        recipes = check_recipes(restored)
        entry = self.register(restored.submission)  # entries, classes and the queue
        for recipe, saved in zip(entry.recipes, recipes, strict=True):
            recipe.state = saved.state
            if saved.system is None:
                continue
            system = self._books.systems.get(saved.system)
            check_place(entry, recipe.id, saved.system, system)
            assert system is not None
            entry.lab = system.lab
            self._books.place_restored(recipe, system)
        began = entry.started_at = restored.started_at
        if began is not None and entry.missing:
            raise ValueError(f"recipe set {entry.id} started without a system for every recipe")
        if entry.lab is None:
            return
        if began is not None:
            self._waitlist.leave(entry)
            end = None if entry.busy_for is None else began + entry.busy_for
            self._profile.occupy(entry.lab, (r.system for r in entry.recipes if r.system), end)
        else:
            self._books.add_holder(entry, entry.lab)
            entry.held_since = restored.held_since
