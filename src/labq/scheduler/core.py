"""The event-driven scheduler (DESIGN.md § Scheduling): events in, decisions out.

State lives in memory and is rebuilt from storage at start (:meth:`Scheduler.restore`);
the core never reads a clock (every event carries ``now``), a database or a process.
This module is the events and the procedure for offering a free system; the
parts do the rest.

The parts it consults, each owning its state (others read it through
:class:`~labq.scheduler.view.SchedulerView`):

- ``books`` — systems, sets, recipes, who holds what, what is offered; the primitive moves;
- ``roster`` — sets joining and leaving, systems joining, restoring after a restart;
- ``fresh`` — what the caches of every part may still use (versions and memos);
- ``index`` / ``waitlist`` — viability classes; waiting sets per class in order, the shelf;
- ``placer`` — who may use which system now, and gang matchings;
- ``profile`` — when each busy system is planned to be free again;
- ``planner`` — each set's plan (max_time, or its prediction), raised as EASY++ does;
- ``backfill`` — holders' reservations and the search for sets that may start before them;
- ``holds`` — who may hold, wound-wait and lending, which holder completes;
- ``chooser`` — what a set may do in a lab now (:class:`~labq.scheduler.choice.Choice`);
- ``weights`` — running slots, buckets, seed 004's weights and the lock line (``keeper``);
- ``trees`` — the distro trees each lab carries (in the index's classes).

How a free system is given away (the pending-system event), in the system's
order (effective priority, nominal priority, weight, submit time, id): the
first set that is allowed to take it does —

1. a set holding systems in the lab grows with it;
2. a set that can start at once (with the lab's free systems, or borrowing
   holders' spares) starts, unless it would delay a higher-ranked holder's
   reserved start (EASY backfill, both rules);
3. a set holding in another lab that can start here at once moves here;
4. a set that may hold here starts holding.

When that first set would only hold, the best-ordered set that can start now
without delaying any reservation (found on the shelf) gets the system instead.
After every gain the holders of the lab are tried in rank order (wound-wait).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from labq.domain.distro import DistroTree
from labq.domain.locktable import Grant
from labq.domain.priority import Priority
from labq.domain.states import Condition, RecipeState
from labq.scheduler import decisions as d
from labq.scheduler.choice import Choice, ChoiceKind, Placement
from labq.scheduler.consistency import repairs, unrunnable
from labq.scheduler.entries import Eligibility, SetEntry, SetSubmission, SystemEntry, set_entry
from labq.scheduler.restore import RestoredSet
from labq.scheduler.retry import retry_decision
from labq.scheduler.state import CoreState
from labq.scheduler.vms import creations


class Scheduler(CoreState):
    """The scheduling core. Each public method is one event; it returns the decisions.

    Its parts and what others may read of them (a
    :class:`~labq.scheduler.view.SchedulerView`) are in :class:`CoreState`.
    """

    # --- events ---------------------------------------------------------------

    def add_system(self, system: SystemEntry, now: float) -> list[d.Decision]:
        """A system joins a lab; an automated one is pending at once (seed 000)."""
        self._books.begin(now)
        self._roster.add_system(system)
        if system.condition is not Condition.REMOVED:
            self._books.make_pending(system.fqdn)
        return self._finish()

    def change_condition(self, fqdn: str, condition: Condition, now: float) -> list[d.Decision]:
        """An admin changed a system's condition."""
        self._books.begin(now)
        system = self._books.set_condition(fqdn, condition)
        if system.recipe is not None:
            self._give_back_held(system, f"{fqdn} became {condition.value}")
        elif condition is Condition.REMOVED:
            self._books.withdraw(fqdn)
        else:
            self._books.make_pending(fqdn)
        return self._finish()

    def hold_system(self, fqdn: str, person: str, now: float) -> list[d.Decision]:
        """A person takes a system (a reservation or a loan): the queue gets it no more.

        A recipe running on it runs to its end; a set only holding it (not
        started) gives it back. Its condition is untouched: releasing it
        (:meth:`release_system`) makes it serve as before.
        """
        self._books.begin(now)
        if self._books.systems[fqdn].held_by != person:
            system = self._books.hand_to(fqdn, person)
            self._give_back_held(system, f"{fqdn} was reserved by {person}")
        return self._finish()

    def release_system(self, fqdn: str, now: float) -> list[d.Decision]:
        """A reservation or loan ended: the system is offered to the queue again."""
        self._books.begin(now)
        if self._books.systems[fqdn].held_by is not None:
            system = self._books.hand_to(fqdn, None)
            if system.recipe is None and system.condition is not Condition.REMOVED:
                self._books.make_pending(fqdn)
        return self._finish()

    def submit(self, sets: Sequence[SetSubmission], now: float) -> list[d.Decision]:
        """The new-job event: place the new sets, best-ranked first, on free systems."""
        self._books.begin(now)
        entries = [self._roster.register(submission) for submission in sets]
        for entry in sorted(entries, key=self.rank_of, reverse=True):
            if entry.lab is None and entry.waiting:  # an offer in between may have placed it
                self._place_new(entry)
            self._drain()
        return self._finish()

    def started(self, set_id: int, now: float) -> list[d.Decision]:
        """Nothing to decide: the core counted the set as started when it said ``Start``."""
        self._books.begin(now)
        entry = self._books.sets[set_id]
        if entry.started_at is None:
            entry.started_at = now
        return self._finish()

    def finish(
        self, set_id: int, outcomes: Mapping[int, RecipeState], now: float
    ) -> list[d.Decision]:
        """A started set ended: each recipe completed, aborted or was cancelled."""
        self._books.begin(now)
        entry = self._books.sets[set_id]
        self._profile.vacate(r.system for r in entry.recipes if r.system is not None)
        aborted_on: dict[int, str] = {}
        for recipe in entry.recipes:
            outcome = outcomes.get(recipe.id, RecipeState.COMPLETED)
            if not outcome.is_final:
                raise ValueError(f"recipe {recipe.id} cannot finish as {outcome.value}")
            if outcome is RecipeState.ABORTED and recipe.system is not None:
                aborted_on[recipe.id] = recipe.system
            recipe.state = outcome
            self._books.free_system(recipe)
        self._roster.retire(entry)
        if entry.started and entry.lab is not None:
            self._weights.finished(entry, entry.lab)
        self._retry(entry, aborted_on)
        self._drain()
        return self._finish()

    def ended_unheard(
        self,
        submission: SetSubmission,
        outcomes: Mapping[int, RecipeState],
        aborted_on: Mapping[int, str],
        now: float,
    ) -> list[d.Decision]:
        """A set ended while no scheduler heard of it (its end was written, the server died
        before it was told): decide the retry it may be owed, and nothing else."""
        self._books.begin(now)
        if submission.id in self._books.sets:
            raise ValueError(f"recipe set {submission.id} is known: finish it instead")
        recipes = self._roster.recipes_of(submission)
        for recipe in recipes:
            recipe.state = outcomes.get(recipe.id, RecipeState.COMPLETED)
        entry = set_entry(submission, recipes)
        entry.finished = True
        self._retry(entry, aborted_on)
        return self._finish()

    def cancel(
        self, set_ids: Iterable[int], now: float, reason: str = "cancelled"
    ) -> list[d.Decision]:
        """Cancel sets: waiting ones at once, started ones by asking them to stop."""
        books = self._books
        books.begin(now)
        for set_id in set_ids:
            entry = books.sets[set_id]
            if entry.finished:
                continue
            if entry.started:
                books.emit(d.Stop(set_id, reason))
                continue
            for recipe in entry.recipes:
                recipe.state = RecipeState.CANCELLED
                books.emit(d.Cancel(recipe.id, set_id))
                books.free_system(recipe)
            self._roster.retire(entry)
        self._drain()
        return self._finish()

    def change_priority(
        self, set_ids: Iterable[int], priority: Priority, now: float
    ) -> list[d.Decision]:
        """A set's nominal priority changed: it is re-queued and may take free systems."""
        self._books.begin(now)
        for set_id in set_ids:
            entry = self._books.sets[set_id]
            if not entry.waiting:
                continue
            entry.priority = priority
            self._waitlist.reorder(entry)
            if entry.lab is None:
                self._place_new(entry)
            else:
                self._fresh.holds_moved(entry.lab)  # the ranks of its holders changed
                self._complete(entry.lab)
            self._drain()
        return self._finish()

    def change_eligibility(
        self, updates: Mapping[int, Eligibility], now: float
    ) -> list[d.Decision]:
        """Dependencies or filters changed what blocks some waiting sets, or their buckets."""
        self._books.begin(now)
        for set_id, eligibility in updates.items():
            entry = self._books.sets.get(set_id)
            if entry is not None and entry.waiting:
                self._weights.reconsidered(entry, eligibility)
        self._drain()
        return self._finish()

    def change_prediction(self, set_id: int, seconds: float | None, now: float) -> list[d.Decision]:
        """The service predicts a set anew (scheduler/planning.py): its plan follows."""
        self._books.begin(now)
        entry = self._books.sets[set_id]
        if not entry.finished:
            self._planner.change(entry, seconds)
        return self._finish()

    def pause_lab(self, lab: str, now: float) -> list[d.Decision]:
        """Nothing new starts or takes systems in ``lab``; what runs there goes on."""
        self._books.begin(now)
        self._admission.pause(lab)
        return self._finish()

    def resume_lab(self, lab: str, now: float) -> list[d.Decision]:
        """The lab's queue moves again: its holders may start, its free systems are offered."""
        self._books.begin(now)
        # a lab without systems has nothing to offer
        if self._admission.resume(lab) and lab in self._books.free:
            self._books.reopen(lab)
        return self._finish()

    def locks_held(
        self, set_id: int, grants: Sequence[Grant] | None, now: float
    ) -> list[d.Decision]:
        """The lock service says what a running set really holds (None: go by its declaration)."""
        self._books.begin(now)
        entry = self._books.sets.get(set_id)
        if entry is not None and entry.started and not entry.finished:
            self._weights.locks_held(entry, grants)
        return self._finish()

    def set_trees(self, lab: str, trees: Iterable[DistroTree], now: float) -> list[d.Decision]:
        """The lab's distro trees are now ``trees``: holds there that can no longer complete
        are given back; idle systems that may serve more sets are offered again."""
        self._books.begin(now)
        for entry, reason in self._trees.carry(lab, tuple(trees)):
            self._holds.unhold(entry, reason)
        return self._finish()

    def consistency_pass(self, now: float) -> list[d.Decision]:
        """The slow safety net: abort what can never run, give back holds that cannot complete."""
        self._books.begin(now)
        waiting = [e for e in self._books.sets.values() if e.waiting]
        found = repairs(
            waiting,
            sorted(self._books.free),
            ever=self._could_ever_run_in,
            now_able=self.could_run_in,
            max_age=self._config.holds_max_age,
            now=now,
        )
        for repair in found:
            entry = self._books.sets[repair.set_id]
            if repair.action == "abort":
                self._abort_unrunnable(entry)
            else:
                self._holds.unhold(entry, repair.reason)
        self._drain()
        return self._finish()

    def restore(
        self,
        systems: Iterable[SystemEntry],
        sets: Iterable[RestoredSet],
        *,
        held: Mapping[int, Sequence[Grant]] | None = None,
        trees: Mapping[str, Iterable[DistroTree]] | None = None,
    ) -> None:
        """Fill a fresh scheduler with systems and sets in their places, deciding nothing.

        ``systems`` in the order they were added, ``sets`` in the order they
        were submitted, ``trees`` per lab. Raises ValueError when the scheduler
        is not fresh or the state is impossible (see :mod:`labq.scheduler.restore`).
        """
        self._trees.load(trees or {})
        self._roster.restore(systems, sets, held or {})

    def offer(self, fqdns: Iterable[str], now: float) -> list[d.Decision]:
        """The pending-system event for free systems: each goes to the best candidate or idles."""
        self._books.begin(now)
        for fqdn in fqdns:
            system = self._books.systems[fqdn]
            if system.recipe is None and system.condition is not Condition.REMOVED:
                self._books.make_pending(fqdn)
        return self._finish()

    # --- placing a new set -----------------------------------------------------------

    def _place_new(self, entry: SetEntry) -> None:
        """Start the set if it fits whole somewhere now; else hold where it starts soonest."""
        free = self._books.free.keys()
        labs = [] if not entry.eligible else sorted(free - self._admission.paused)
        started = self._chooser.start_anywhere(entry, labs)
        if started is not None:
            self._start(entry, started[0], started[1].placement)
            return
        hold = self._chooser.best_hold(entry, labs)
        if (
            hold is not None
            and self._keeper.reason(entry, hold[0]) is None
            and self._holds.may_hold(entry, hold[0])
        ):
            self._holds.hold(entry, hold[0], hold[1])
            self._complete(hold[0])
            return
        for recipe in entry.recipes:
            if recipe.state is RecipeState.NEW:
                recipe.state = RecipeState.QUEUED
                self._books.emit(d.Enqueue(recipe.id, entry.id))

    # --- the pending-system event ---------------------------------------------------

    def _drain(self) -> None:
        """Offer every system due, in order; labs reopened meanwhile offer their idle ones."""
        books = self._books
        while True:
            fqdn = books.next_offer()
            if fqdn is None:
                lab = books.next_reopened()  # a slot opened or a set became eligible
                if lab is None:
                    return
                self._complete(lab)
                books.admit(lab)
                continue
            system = books.systems[fqdn]
            lab = system.lab
            if system.recipe is not None or system.condition is Condition.REMOVED:
                books.unpend(fqdn)
                continue
            was_pending = books.is_pending(fqdn)
            if self._offer(system):
                if system.recipe is None:  # a backfill started elsewhere: offer it again
                    books.offer_again(fqdn)
                continue
            if was_pending:
                books.idle(fqdn)
            if books.holders[lab]:
                # a holder may use it indirectly, by moving one of its own recipes onto it
                self._complete(lab)
            self._move_here(lab)

    def _offer(self, system: SystemEntry) -> bool:
        """Give one free system to the first set allowed to take it, or to a backfill."""
        lab = system.lab
        if lab in self._admission.paused:
            return False
        first = self._first_choice(system, lab)
        if first is None:
            return False
        if (
            first.kind in (ChoiceKind.GROW, ChoiceKind.HOLD)
            and self._admission.slot_free(lab)
            and not self._chooser.completes_with(first.entry, lab)
        ):
            backfill = self._chooser.backfill_start(system, first.entry)
            if backfill is not None:
                return self._take(backfill, lab)
        return self._take(first, lab)

    def _first_choice(self, system: SystemEntry, lab: str) -> Choice | None:
        """The first candidate in the system's order that is allowed to take it."""
        gate = self._admission.slot_free(lab)  # closed: sets may hold and grow, not start
        candidates = self.candidates(system, self._books.now)
        skipped = 0
        try:
            for entry, key in candidates:
                choice = self._chooser.consider(system, entry, key, lab)
                if choice is not None:
                    return choice
                skipped += 1
                if not gate and skipped > self._config.backfill_depth:
                    return None  # nobody may start here: do not walk the whole queue for a hold
        finally:
            candidates.close()
        return None

    def _move_here(self, lab: str) -> None:
        """A system of ``lab`` went idle: a set holding in another lab that can start here
        whole now moves here (its holds there may wait for a system that is busy for long)."""
        if lab in self._admission.paused:
            return
        sets, holders = self._books.sets, self._books.holders
        elsewhere = [sets[h] for other, ids in holders.items() if other != lab for h in ids]
        for entry in sorted(elsewhere, key=self.rank_of, reverse=True):
            choice = self._chooser.move(entry, lab)
            if choice is not None:
                self._take(choice, lab)
                return

    def _take(self, choice: Choice, lab: str) -> bool:
        """Do what the choice says (a hold only if a slot is free or taken from a lower one)."""
        entry, placement = choice.entry, choice.placement
        if choice.kind is ChoiceKind.START:
            self._start(entry, lab, placement)
        elif choice.kind is ChoiceKind.MOVE:
            self._holds.unhold(entry, f"moved to {lab}, where the set can start at once")
            self._start(entry, lab, placement)
        elif choice.kind is ChoiceKind.GROW:
            self._holds.bind(entry, lab, placement)
            self._complete(lab)
        elif self._holds.may_hold(entry, lab):
            self._holds.hold(entry, lab, placement)
            self._complete(lab)
        else:
            return False
        return True

    # --- moves: sets start ----------------------------------------------------------

    def _start(self, entry: SetEntry, lab: str, placement: Placement) -> None:
        self._holds.bind(entry, lab, placement)
        self._holds.forget(entry)
        entry.started_at = self._books.now
        entry.held_since = None
        for creation in creations(entry, self._books.systems):
            self._books.emit(creation)
        self._books.emit(d.Start(entry.id, lab))
        self._keeper.left(entry)  # those behind it in line now wait for its locks
        self._waitlist.leave(entry)
        end = None if entry.busy_for is None else self._books.now + entry.busy_for
        self._profile.occupy(lab, (r.system for r in entry.recipes if r.system), end)
        self._weights.started(entry, lab)

    def _complete(self, lab: str) -> None:
        """The lab's holders, best rank first, start while one completes."""
        while (holder := self._holds.completing(lab)) is not None:
            self._start(holder, lab, {})

    # --- sets ending, holds given back ------------------------------------------------

    def _retry(self, entry: SetEntry, aborted_on: Mapping[int, str]) -> None:
        """The retry an ended set is owed, if any."""
        decision = retry_decision(
            entry,
            aborted_on,
            index=self._index,
            systems=self._books.systems,
            policy=self._policy,
            hard_limit=self._config.retry_hard_limit,
        )
        if decision is not None:
            self._books.emit(decision)

    def _abort_unrunnable(self, entry: SetEntry) -> None:
        for recipe in entry.placed():
            self._books.take_back(recipe, "its set can never run")
        self._holds.settle(entry)
        message = unrunnable(entry, self._index, self._books.systems)
        for recipe in entry.recipes:
            recipe.state = RecipeState.ABORTED
            self._books.emit(d.Abort(recipe.id, entry.id, message))
        self._roster.retire(entry)
        self._books.emit(d.SetError(entry.id, message))

    def _could_ever_run_in(self, entry: SetEntry, lab: str) -> bool:
        return self._placer.could_run(lab, entry.demands(), entry.group, ever=True)

    def _give_back_held(self, system: SystemEntry, why: str) -> None:
        """A set that holds ``system`` without having started gives it back when it may no
        longer use it (a started one keeps it to its end)."""
        if system.recipe is None:
            return
        recipe = self._books.recipes[system.recipe]
        holder = self._books.sets[recipe.set_id]
        if not holder.started and not self._placer.usable(system, recipe.klass, holder.group):
            self._books.take_back(recipe, why)
            self._holds.settle(holder)

    # --- bookkeeping ---------------------------------------------------------------

    def _finish(self) -> list[d.Decision]:
        self._drain()
        return self._books.decided()
