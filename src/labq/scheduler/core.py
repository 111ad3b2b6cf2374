"""The event-driven scheduler (DESIGN.md § Scheduling): events in, decisions out.

State lives in memory and is rebuilt from storage at start (:meth:`Scheduler.restore`);
the core never reads a clock (every event carries ``now``), a database or a process.

The parts it consults, each with its own state:

- ``books`` — systems, sets, recipes, who holds what; the primitive moves;
- ``index`` / ``queue`` — viability classes, and waiting sets per class in order;
- ``placer`` — who may use which system now, and gang matchings;
- ``profile`` — when each busy system is declared free again;
- ``backfill`` — holders' reservations, the shaped shelf of candidates, the search;
- ``holds`` — who may hold, wound-wait and lending, holders completing;
- ``admission`` / ``running_locks`` — running slots, buckets, and seed 004's weights;
- ``keeper`` — the sets kept queued because they would only wait for a lock (issue 11).

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

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from labq.domain.locktable import Grant
from labq.domain.model import AccessPolicy
from labq.domain.priority import Priority
from labq.domain.states import Condition, RecipeState
from labq.scheduler import decisions as d
from labq.scheduler.admission import Admission
from labq.scheduler.backfill import Backfill
from labq.scheduler.books import Books
from labq.scheduler.consistency import repairs, unrunnable
from labq.scheduler.entries import (
    Eligibility,
    RecipeEntry,
    SchedulerConfig,
    SetEntry,
    SetSubmission,
    SystemEntry,
    ViabilityClass,
)
from labq.scheduler.holds import Holds
from labq.scheduler.index import ClassIndex, Queue
from labq.scheduler.lockline import Keeper
from labq.scheduler.order import Rank, age_of, predictive_weight
from labq.scheduler.placement import Placer
from labq.scheduler.predictive import RunningLocks, declared, held
from labq.scheduler.profile import Profile
from labq.scheduler.reservation import Reservation
from labq.scheduler.restore import RestoredSet, check_place, check_recipes
from labq.scheduler.retry import retry_decision

Placement = Mapping[int, str]  # recipe id -> system
Choice = tuple[str, SetEntry, Placement]  # (start | grow | move | hold, set, systems)


class Scheduler:
    """The scheduling core. Each public method is one event; it returns the decisions."""

    def __init__(self, config: SchedulerConfig | None = None, policy: AccessPolicy | None = None):
        self.config = config or SchedulerConfig()
        self.policy = policy or AccessPolicy()
        self.books = Books(self.config, self._requeue)
        # what the service and the simulator read: the books' own mappings
        self.systems = self.books.systems
        self.sets = self.books.sets
        self.recipes = self.books.recipes
        self.free = self.books.free  # lab -> systems holding no recipe (not removed)
        self.holders = self.books.holders  # lab -> sets holding systems, not started
        self.index = ClassIndex()
        self.queue = Queue()
        self.waiting_by_class: Counter[str] = Counter()  # class -> waiting sets with a recipe of it
        self.placer = Placer(self.index, self.systems, self.policy, self.waiting_by_class)
        self.profile = Profile()
        self.backfill = Backfill(
            self.books, self.placer, self.profile, self.index, self.policy, self.config
        )
        self.admission = Admission(self.config)
        self.holds = Holds(self.books, self.placer, self.backfill, self.admission, self._start)
        self.running_locks = RunningLocks(self.config.lock_levels)
        self.declaring: set[int] = set()  # waiting sets whose spv depends on running sets
        self.keeper = Keeper(
            self.sets, self.books.rank_of, self.running_locks, enabled=self.config.predictive
        )

    # --- events ---------------------------------------------------------------

    def add_system(self, system: SystemEntry, now: float) -> list[d.Decision]:
        """A system joins a lab; an automated one is pending at once (seed 000)."""
        self._begin(now)
        self._add_system(system)
        if system.condition is not Condition.REMOVED:
            self.books.make_pending(system.fqdn)
        return self._finish()

    def change_condition(self, fqdn: str, condition: Condition, now: float) -> list[d.Decision]:
        """An admin changed a system's condition."""
        self._begin(now)
        system = self.systems[fqdn]
        system.condition = condition
        self._systems_changed()
        if system.recipe is not None:
            self._give_back_held(system, f"{fqdn} became {condition.value}")
        elif condition is Condition.REMOVED:
            self.free[system.lab].discard(fqdn)
            self.books.pending[system.lab].discard(fqdn)
        else:
            self.books.make_pending(fqdn)
        return self._finish()

    def hold_system(self, fqdn: str, person: str, now: float) -> list[d.Decision]:
        """A person takes a system (a reservation or a loan): the queue gets it no more.

        A recipe running on it runs to its end; a set only holding it (not
        started) gives it back. Its condition is untouched: releasing it
        (:meth:`release_system`) makes it serve as before.
        """
        self._begin(now)
        system = self.systems[fqdn]
        if system.held_by != person:
            system.held_by = person
            self._systems_changed()
            self._give_back_held(system, f"{fqdn} was reserved by {person}")
        return self._finish()

    def release_system(self, fqdn: str, now: float) -> list[d.Decision]:
        """A reservation or loan ended: the system is offered to the queue again."""
        self._begin(now)
        system = self.systems[fqdn]
        if system.held_by is not None:
            system.held_by = None
            self._systems_changed()
            if system.recipe is None and system.condition is not Condition.REMOVED:
                self.books.make_pending(fqdn)
        return self._finish()

    def submit(self, sets: Sequence[SetSubmission], now: float) -> list[d.Decision]:
        """The new-job event: place the new sets, best-ranked first, on free systems."""
        self._begin(now)
        entries = [self._register(submission) for submission in sets]
        for entry in sorted(entries, key=self.rank_of, reverse=True):
            if entry.lab is None and entry.waiting:  # an offer in between may have placed it
                self._place_new(entry)
            self._drain()
        return self._finish()

    def started(self, set_id: int, now: float) -> list[d.Decision]:
        """Nothing to decide: the core counted the set as started when it said ``Start``."""
        self._begin(now)
        entry = self.sets[set_id]
        if entry.started_at is None:
            entry.started_at = now
        return self._finish()

    def finish(
        self, set_id: int, outcomes: Mapping[int, RecipeState], now: float
    ) -> list[d.Decision]:
        """A started set ended: each recipe completed, aborted or was cancelled."""
        self._begin(now)
        entry = self.sets[set_id]
        self.profile.vacate(r.system for r in entry.recipes if r.system is not None)
        aborted_on: dict[int, str] = {}
        for recipe in entry.recipes:
            outcome = outcomes.get(recipe.id, RecipeState.COMPLETED)
            if not outcome.is_final:
                raise ValueError(f"recipe {recipe.id} cannot finish as {outcome.value}")
            if outcome is RecipeState.ABORTED and recipe.system is not None:
                aborted_on[recipe.id] = recipe.system
            recipe.state = outcome
            self.books.free_system(recipe)
        self._retire(entry)
        if entry.started and entry.lab is not None:
            self._account_finish(entry, entry.lab)
        decision = retry_decision(
            entry,
            aborted_on,
            index=self.index,
            systems=self.systems,
            policy=self.policy,
            hard_limit=self.config.retry_hard_limit,
        )
        if decision is not None:
            self.books.out.append(decision)
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
        self._begin(now)
        if submission.id in self.sets:
            raise ValueError(f"recipe set {submission.id} is known: finish it instead")
        recipes = [
            RecipeEntry(
                spec.id,
                submission.id,
                index,
                self.index.add_class(ViabilityClass(spec.requirement, spec.excluded, spec.force)),
                spec.role,
                state=outcomes.get(spec.id, RecipeState.COMPLETED),
            )
            for index, spec in enumerate(submission.recipes)
        ]
        entry = _set_entry(submission, recipes)
        entry.finished = True
        decision = retry_decision(
            entry,
            aborted_on,
            index=self.index,
            systems=self.systems,
            policy=self.policy,
            hard_limit=self.config.retry_hard_limit,
        )
        if decision is not None:
            self.books.out.append(decision)
        return self._finish()

    def cancel(
        self, set_ids: Iterable[int], now: float, reason: str = "cancelled"
    ) -> list[d.Decision]:
        """Cancel sets: waiting ones at once, started ones by asking them to stop."""
        self._begin(now)
        for set_id in set_ids:
            entry = self.sets[set_id]
            if entry.finished:
                continue
            if entry.started:
                self.books.out.append(d.Stop(set_id, reason))
                continue
            for recipe in entry.recipes:
                recipe.state = RecipeState.CANCELLED
                self.books.out.append(d.Cancel(recipe.id, set_id))
                self.books.free_system(recipe)
            self._retire(entry)
        self._drain()
        return self._finish()

    def change_priority(
        self, set_ids: Iterable[int], priority: Priority, now: float
    ) -> list[d.Decision]:
        """A set's nominal priority changed: it is re-queued and may take free systems."""
        self._begin(now)
        for set_id in set_ids:
            entry = self.sets[set_id]
            if not entry.waiting:
                continue
            entry.priority = priority
            entry.version += 1
            self._requeue_all(entry)
            if entry.lab is None:
                self._place_new(entry)
            else:
                self.books.holds_moved[entry.lab] += 1  # the ranks of its holders changed
                self.holds.complete(entry.lab)
            self._drain()
        return self._finish()

    def change_eligibility(
        self, updates: Mapping[int, Eligibility], now: float
    ) -> list[d.Decision]:
        """Dependencies or filters changed what blocks some waiting sets, or their buckets."""
        self._begin(now)
        for set_id, eligibility in updates.items():
            entry = self.sets.get(set_id)
            if entry is None or not entry.waiting:
                continue
            was = entry.eligible
            self.admission.leave(entry)
            entry.blocked = eligibility.blocked
            entry.buckets = eligibility.buckets
            self.admission.join(entry)
            entry.throttle = self.admission.throttle_of(entry)
            self._eligibility_changed(entry, was)
        self._drain()
        return self._finish()

    def pause_lab(self, lab: str, now: float) -> list[d.Decision]:
        """Nothing new starts or takes systems in ``lab``; what runs there goes on."""
        self._begin(now)
        self.admission.paused.add(lab)
        return self._finish()

    def resume_lab(self, lab: str, now: float) -> list[d.Decision]:
        """The lab's queue moves again: its holders may start, its free systems are offered."""
        self._begin(now)
        if lab in self.admission.paused:
            self.admission.paused.discard(lab)
            if lab in self.free:  # a lab without systems has nothing to offer
                self.books.reopen.add(lab)
        return self._finish()

    def locks_held(
        self, set_id: int, grants: Sequence[Grant] | None, now: float
    ) -> list[d.Decision]:
        """The lock service says what a running set really holds (None: go by its declaration)."""
        self._begin(now)
        entry = self.sets.get(set_id)
        running = entry is not None and entry.started and not entry.finished
        if running and self._weigh(self.sets[set_id], grants):
            self._refresh_spv()
        return self._finish()

    def consistency_pass(self, now: float) -> list[d.Decision]:
        """The slow safety net: abort what can never run, give back holds that cannot complete."""
        self._begin(now)
        waiting = [e for e in self.sets.values() if e.waiting]
        found = repairs(
            waiting,
            sorted(self.free),
            ever=self._could_ever_run_in,
            now_able=self.could_run_in,
            max_age=self.config.holds_max_age,
            now=now,
        )
        for repair in found:
            entry = self.sets[repair.set_id]
            if repair.action == "abort":
                self._abort_unrunnable(entry)
            else:
                self.holds.unhold(entry, repair.reason)
        self._drain()
        return self._finish()

    def restore(
        self,
        systems: Iterable[SystemEntry],
        sets: Iterable[RestoredSet],
        *,
        held: Mapping[int, Sequence[Grant]] | None = None,
    ) -> None:
        """Fill a fresh scheduler with systems and sets in their places, deciding nothing.

        ``systems`` in the order they were added, ``sets`` in the order they
        were submitted. Raises ValueError when the scheduler is not fresh or
        the state is impossible (see :mod:`labq.scheduler.restore`).
        """
        if self.systems or self.sets:
            raise ValueError("restore needs a fresh scheduler")
        for system in systems:
            if system.fqdn in self.systems:
                raise ValueError(f"system {system.fqdn} is listed twice")
            self._add_system(system)
        for restored in sets:
            self._restore_set(restored)
        for fqdn, system in self.systems.items():
            if system.recipe is None and system.condition is not Condition.REMOVED:
                self.free[system.lab].add(fqdn)
        self._recount(held or {})

    def offer(self, fqdns: Iterable[str], now: float) -> list[d.Decision]:
        """The pending-system event for free systems: each goes to the best candidate or idles."""
        self._begin(now)
        for fqdn in fqdns:
            system = self.systems[fqdn]
            if system.recipe is None and system.condition is not Condition.REMOVED:
                self.books.make_pending(fqdn)
        return self._finish()

    # --- queries used by the service, the simulator and the tests ----------------

    @property
    def now(self) -> float:
        """The time of the event being handled."""
        return self.books.now

    def rank_of(self, entry: SetEntry) -> Rank:
        """The set's global hold rank now."""
        return self.books.rank_of(entry)

    def weight_of(self, entry: SetEntry) -> float:
        """The set's predictive weight now (0 with the predictive order off)."""
        return predictive_weight(entry, self.books.now, self.config)

    def age_ticks_of(self, entry: SetEntry, now: float | None = None) -> int:
        """How many ticks the set has waited."""
        return age_of(entry, self.books.now if now is None else now, self.config)

    def waits_for(self, entry: SetEntry) -> str | None:
        """What keeps a waiting set from running now, in plain words (None: only its turn)."""
        if entry.blocked is not None:
            return entry.blocked
        if entry.throttle is not None:
            return entry.throttle
        if entry.lab is not None:
            return self.admission.slot_reason(entry.lab)
        # not placed yet: say why only when every lab that could run it is closed to it
        reasons = [
            self.keeper.reason(entry, lab) or self.admission.slot_reason(lab)
            for lab in sorted(self.free)
            if self.could_run_in(entry, lab)
        ]
        if reasons and all(reasons):
            return "; ".join(dict.fromkeys(r for r in reasons if r))
        return None

    def could_run_in(self, entry: SetEntry, lab: str) -> bool:
        """Whether the systems ``lab`` may use now could run the whole set once free."""
        return self.placer.could_run(lab, entry.demands(), entry.group)

    def reservation_of(self, entry: SetEntry) -> Reservation | None:
        """A holder's reservation in its lab now (None for a set that holds nothing)."""
        if entry.lab is None or entry.id not in self.holders.get(entry.lab, ()):
            return None
        return self.backfill.reservation(entry, entry.lab)

    # --- placing a new set -----------------------------------------------------------

    def _place_new(self, entry: SetEntry) -> None:
        """Start the set if it fits whole somewhere now; else hold where it starts soonest."""
        labs = [] if not entry.eligible else sorted(self.free.keys() - self.admission.paused)
        for lab in labs:
            choice = self._start_choice(entry, lab)
            if choice is not None:
                self._start(entry, lab, choice[2])
                return
        hold = self._best_hold(entry, labs)
        if (
            hold is not None
            and self.keeper.reason(entry, hold[0]) is None
            and self.holds.may_hold(entry, hold[0])
        ):
            self.holds.hold(entry, hold[0], hold[1])
            return
        for recipe in entry.recipes:
            if recipe.state is RecipeState.NEW:
                recipe.state = RecipeState.QUEUED
                self.books.out.append(d.Enqueue(recipe.id, entry.id))

    def _best_hold(self, entry: SetEntry, labs: list[str]) -> tuple[str, Placement] | None:
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

    # --- the pending-system event ---------------------------------------------------

    def _offer(self, system: SystemEntry) -> bool:
        """Give one free system to the first set allowed to take it, or to a backfill."""
        lab = system.lab
        if lab in self.admission.paused:
            return False
        first = self._first_choice(system, lab)
        if first is None:
            return False
        how, entry, _ = first
        if (
            how in ("grow", "hold")
            and self.admission.slot_free(lab)
            and not self._completes_with(entry, lab)
        ):
            backfill = self._backfill_choice(system, entry)
            if backfill is not None:
                return self._take(backfill, lab)
        return self._take(first, lab)

    def _first_choice(self, system: SystemEntry, lab: str) -> Choice | None:
        """The first candidate in the system's order that is allowed to take it."""
        gate = self.admission.slot_free(lab)  # closed: sets may hold and grow, not start
        classes = self.index.classes_of.get(system.fqdn, set())
        candidates = self.queue.candidates(
            system, classes, self.sets, self.policy, self.books.now, self.config
        )
        skipped = 0
        try:
            for entry, key in candidates:
                choice = self._consider(system, entry, key, lab)
                if choice is not None:
                    return choice
                skipped += 1
                if not gate and skipped > self.config.backfill_depth:
                    return None  # nobody may start here: do not walk the whole queue for a hold
        finally:
            candidates.close()
        return None

    def _consider(self, system: SystemEntry, entry: SetEntry, key: str, lab: str) -> Choice | None:
        if not entry.waiting or not entry.eligible:
            return None
        if entry.lab is not None and entry.lab != lab:
            return self._move_choice(entry, lab)
        recipe = entry.open_recipe(key)
        if recipe is None or not self.placer.usable(system, key, entry.group):
            return None
        if entry.lab == lab:
            return ("grow", entry, {recipe.id: system.fqdn})
        choice = self._start_choice(entry, lab)
        if choice is not None:
            return choice
        if (
            self.holds.could_hold(entry, lab)
            and self.could_run_in(entry, lab)
            and self.keeper.reason(entry, lab) is None  # it would start only to wait
        ):
            return ("hold", entry, {recipe.id: system.fqdn})
        return None

    def _start_choice(self, entry: SetEntry, lab: str) -> Choice | None:
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
        return ("start", entry, placement)

    def _move_choice(self, entry: SetEntry, lab: str) -> Choice | None:
        """A set holding elsewhere moves here when it can start here whole at once."""
        if not self.admission.slot_free(lab) or not self.could_run_in(entry, lab):
            return None
        placement = self._fit_now(entry, lab, every=True)
        if placement is None or self.backfill.delays(entry, lab, placement):
            return None
        if self.keeper.reason(entry, lab) is not None:
            return None
        return ("move", entry, placement)

    def _move_here(self, lab: str) -> None:
        """A system of ``lab`` went idle: a set holding in another lab that can start here
        whole now moves here (its holds there may wait for a system that is busy for long)."""
        if lab in self.admission.paused:
            return
        elsewhere = [
            self.sets[h] for other, ids in self.holders.items() if other != lab for h in ids
        ]
        for entry in sorted(elsewhere, key=self.rank_of, reverse=True):
            choice = self._move_choice(entry, lab)
            if choice is not None:
                self._take(choice, lab)
                return

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

    def _completes_with(self, entry: SetEntry, lab: str) -> bool:
        """Whether the set could start now with the lab's free systems (the offered one too)."""
        if entry.missing > self.books.available_count(lab):
            return False
        return len(self.placer.place(entry, lab, self.books.available(lab))) == entry.missing

    def _take(self, choice: Choice, lab: str) -> bool:
        how, entry, placement = choice
        if how == "start":
            self._start(entry, lab, placement)
        elif how == "move":
            self.holds.unhold(entry, f"moved to {lab}, where the set can start at once")
            self._start(entry, lab, placement)
        elif how == "grow":
            self.holds.bind(entry, lab, placement)
            self.holds.complete(lab)
        elif self.holds.may_hold(entry, lab):
            self.holds.hold(entry, lab, placement)
        else:
            return False
        return True

    # --- backfill ------------------------------------------------------------------

    def _backfill_choice(self, system: SystemEntry, first: SetEntry) -> Choice | None:
        """The best-ordered set that can start now and delays no reservation in the lab."""
        lab = system.lab
        found = self.backfill.search(system, first, lambda entry: self._fit_start(entry, lab))
        return None if found is None else ("start", found[0], dict(found[1]))

    def _fit_start(self, entry: SetEntry, lab: str) -> Placement | None:
        choice = self._start_choice(entry, lab)
        return None if choice is None else choice[2]

    def _spares(self, lab: str, borrower: SetEntry) -> set[str]:
        """Systems the lab's other holders hold (they may lend them, within the backfill rules)."""
        out: set[str] = set()
        for holder_id in self.holders[lab]:
            if holder_id != borrower.id:
                out |= self.sets[holder_id].held
        return out

    # --- moves: sets start ----------------------------------------------------------

    def _start(self, entry: SetEntry, lab: str, placement: Placement) -> None:
        self.holds.bind(entry, lab, placement)
        self.holds.forget(entry)
        entry.started_at = self.books.now
        entry.held_since = None
        self.books.out.append(d.Start(entry.id, lab))
        self.keeper.left(entry)  # those behind it in line now wait for its locks
        self._retire_waiting(entry)
        end = None if entry.max_time is None else self.books.now + entry.max_time
        self.profile.occupy(lab, (r.system for r in entry.recipes if r.system), end)
        self._account_start(entry, lab)

    def _drain(self) -> None:
        while self.books.offers or self.books.reopen:
            if not self.books.offers:
                lab = min(self.books.reopen)  # a slot opened or a set became eligible
                self.books.reopen.discard(lab)
                self.holds.complete(lab)
                self.books.admit(lab)
                continue
            fqdn = self.books.offers.popleft()
            system = self.systems[fqdn]
            lab = system.lab
            if system.recipe is not None or system.condition is Condition.REMOVED:
                self.books.pending[lab].discard(fqdn)
                continue
            was_pending = fqdn in self.books.pending[lab]
            if self._offer(system):
                if system.recipe is None:  # a backfill started elsewhere: offer it again
                    self.books.offers.append(fqdn)
                continue
            if was_pending:
                self.books.pending[lab].discard(fqdn)
                self.free[lab].add(fqdn)
                if system.condition is Condition.AUTOMATED:
                    self.books.out.append(d.Idle(fqdn))
            if self.holders[lab]:
                # a holder may use it indirectly, by moving one of its own recipes onto it
                self.holds.complete(lab)
            self._move_here(lab)

    # --- sets joining and leaving the queue ------------------------------------------

    def _register(self, submission: SetSubmission) -> SetEntry:
        if submission.id in self.sets:
            raise ValueError(f"recipe set {submission.id} is already known")
        recipes = []
        keys: dict[tuple[int, frozenset[str], str | None], str] = {}  # a wide set repeats one
        for index, spec in enumerate(submission.recipes):
            same = (id(spec.requirement), spec.excluded, spec.force)
            key = keys.get(same)
            if key is None:
                klass = ViabilityClass(spec.requirement, spec.excluded, spec.force)
                key = keys[same] = self.index.add_class(klass)
            recipe = RecipeEntry(spec.id, submission.id, index, key, spec.role)
            self.recipes[spec.id] = recipe
            recipes.append(recipe)
        entry = _set_entry(submission, recipes)
        self.sets[entry.id] = entry
        self.waiting_by_class.update({r.klass for r in entry.recipes})
        entry.spv = self._spv_of(entry)
        if entry.locks.levels and not entry.locks.whole_lab:
            self.declaring.add(entry.id)
        self.admission.join(entry)
        entry.throttle = self.admission.throttle_of(entry)
        self._requeue_all(entry)
        return entry

    def _requeue_all(self, entry: SetEntry) -> None:
        for key in {r.klass for r in entry.unplaced()}:
            self._requeue(entry, key)

    def _requeue(self, entry: SetEntry, klass: str) -> None:
        self.queue.push(entry, klass)
        self.backfill.add(entry, klass)

    def _retire_waiting(self, entry: SetEntry) -> None:
        """The set stops waiting (it started or ended): it no longer counts as demand."""
        self.waiting_by_class.subtract({r.klass for r in entry.recipes})

    def _retire(self, entry: SetEntry) -> None:
        """The set ended (finished, cancelled or aborted)."""
        if entry.waiting:
            self._retire_waiting(entry)
            self.declaring.discard(entry.id)
            self.admission.leave(entry)
            self._left_waiting(entry)
        entry.finished = True
        self.holds.forget(entry)

    def _abort_unrunnable(self, entry: SetEntry) -> None:
        for recipe in entry.placed():
            self.books.take_back(recipe, "its set can never run")
        self.holds.settle(entry)
        message = unrunnable(entry, self.index, self.systems)
        for recipe in entry.recipes:
            recipe.state = RecipeState.ABORTED
            self.books.out.append(d.Abort(recipe.id, entry.id, message))
        self._retire(entry)
        self.books.out.append(d.SetError(entry.id, message))

    def _could_ever_run_in(self, entry: SetEntry, lab: str) -> bool:
        return self.placer.could_run(lab, entry.demands(), entry.group, ever=True)

    # --- admission and the predictive weight -----------------------------------------

    def _account_start(self, entry: SetEntry, lab: str) -> None:
        """A set takes a running slot; its buckets may fill, its locks weigh on others."""
        buckets, weighs = self._count_running(entry, lab)
        self._rethrottle(buckets)
        if weighs:
            self._refresh_spv()

    def _count_running(
        self, entry: SetEntry, lab: str, grants: Sequence[Grant] | None = None
    ) -> tuple[set[str], bool]:
        """Count a started set (its slot, buckets, locks): (its buckets, whether spv may change).

        No decisions: a restore counts the sets it finds running this way too.
        """
        self.declaring.discard(entry.id)
        return self.admission.started(entry, lab), self._weigh(entry, grants)

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

    def _account_finish(self, entry: SetEntry, lab: str) -> None:
        buckets, reopened = self.admission.finished(entry, lab)
        self.books.reopen.update(self.free.keys() if reopened is None else reopened)
        self._rethrottle(buckets)
        weighed = self.running_locks.remove(entry.id)
        if self.keeper.uncount(entry.id):
            self._lock_freed()
        if weighed:
            self._refresh_spv()

    def _lock_freed(self) -> None:
        """A lock was let go: sets kept for it may start, first, on idle systems too."""
        due, gone = self.keeper.freed()
        self._rekey(due)
        if gone:  # else every kept set still waits, and everyone behind them
            self.books.reopen.update(self.free.keys())

    def _rekey(self, set_ids: Iterable[int]) -> None:
        """The sets' spv may have changed (they became due, or stopped being): re-key them."""
        for set_id in set_ids:
            entry = self.sets[set_id]
            value = self._spv_of(entry)
            if value != entry.spv:
                entry.spv = value
                entry.version += 1
                self._requeue_all(entry)

    def _left_waiting(self, entry: SetEntry) -> None:
        """The set stopped waiting: sets kept in line behind it may go now."""
        if self.keeper.left(entry):
            self.books.reopen.update(self.free.keys())

    def _refresh_spv(self) -> None:
        """The running sets changed: re-key the waiting sets whose spv changed with them."""
        for set_id in sorted(self.declaring):
            entry = self.sets[set_id]
            if not entry.waiting:
                self.declaring.discard(set_id)
                continue
            value = self._spv_of(entry)
            if value != entry.spv:
                entry.spv = value
                entry.version += 1
                self._requeue_all(entry)

    def _spv_of(self, entry: SetEntry) -> float:
        """The seed's spv, or 0 for a set the keeper says goes first (see ``lockline``)."""
        if self.keeper.weighs_nothing(entry):
            return 0.0
        return self.running_locks.spv(entry.locks, self.config.spv_base)

    def _rethrottle(self, buckets: Iterable[str]) -> None:
        for bucket in sorted(buckets):
            for set_id in sorted(self.admission.members.get(bucket, ())):
                entry = self.sets[set_id]
                was = entry.eligible
                entry.throttle = self.admission.throttle_of(entry)
                self._eligibility_changed(entry, was)

    def _eligibility_changed(self, entry: SetEntry, was: bool) -> None:
        """Take an ineligible set out of the running; put an eligible one back."""
        if entry.eligible == was:
            return
        entry.version += 1  # its heap items go stale either way
        if not entry.eligible:
            self._left_waiting(entry)
            if entry.lab is not None and not entry.started:
                self.holds.unhold(entry, f"it may not run now: {self.waits_for(entry)}")
            return
        self._requeue_all(entry)
        self.books.reopen.update(self.free.keys())

    # --- systems and restoring ---------------------------------------------------------

    def _add_system(self, system: SystemEntry) -> None:
        self.books.add_system(system)
        self.index.add_system(system)
        self.placer.systems_changed()

    def _systems_changed(self) -> None:
        self.books.epoch += 1
        self.placer.systems_changed()

    def _give_back_held(self, system: SystemEntry, why: str) -> None:
        """A set that holds ``system`` without having started gives it back when it may no
        longer use it (a started one keeps it to its end)."""
        if system.recipe is None:
            return
        recipe = self.recipes[system.recipe]
        holder = self.sets[recipe.set_id]
        if not holder.started and not self.placer.usable(system, recipe.klass, holder.group):
            self.books.take_back(recipe, why)
            self.holds.settle(holder)

    def _restore_set(self, restored: RestoredSet) -> None:
        recipes = check_recipes(restored)
        entry = self._register(restored.submission)  # entries, classes and the queue
        for recipe, saved in zip(entry.recipes, recipes, strict=True):
            recipe.state = saved.state
            if saved.system is None:
                continue
            system = self.systems.get(saved.system)
            check_place(entry, recipe.id, saved.system, system)
            assert system is not None
            entry.lab = system.lab
            system.recipe = recipe.id
            recipe.system = saved.system
        began = entry.started_at = restored.started_at
        if began is not None and entry.missing:
            raise ValueError(f"recipe set {entry.id} started without a system for every recipe")
        if entry.lab is None:
            return
        if began is not None:
            self._retire_waiting(entry)
            end = None if entry.max_time is None else began + entry.max_time
            self.profile.occupy(entry.lab, (r.system for r in entry.recipes if r.system), end)
        else:
            self.holders[entry.lab].add(entry.id)
            entry.held_since = restored.held_since

    def _recount(self, held: Mapping[int, Sequence[Grant]]) -> None:
        """Running slots, buckets, running locks and waiting sets' spv, as events leave them."""
        for entry in self.sets.values():
            if entry.started and not entry.finished and entry.lab is not None:
                self._count_running(entry, entry.lab, held.get(entry.id))
        for entry in self.sets.values():
            if entry.waiting:
                throttle = self.admission.throttle_of(entry)
                if throttle != entry.throttle:
                    entry.throttle = throttle
                    entry.version += 1  # its heap items were pushed while it looked eligible
        self._refresh_spv()

    # --- bookkeeping ---------------------------------------------------------------

    def _begin(self, now: float) -> None:
        if now < self.books.now:
            raise ValueError(f"time went backwards: {now} < {self.books.now}")
        self.books.now = now
        self.books.out = []

    def _finish(self) -> list[d.Decision]:
        self._drain()
        out, self.books.out = self.books.out, []
        return out


def _set_entry(submission: SetSubmission, recipes: list[RecipeEntry]) -> SetEntry:
    """The core's entry for a submitted set with these recipes."""
    return SetEntry(
        id=submission.id,
        job=submission.job,
        priority=submission.priority,
        submitted=submission.submitted,
        recipes=recipes,
        group=submission.group,
        max_time=submission.max_time,
        max_retries=submission.max_retries,
        attempt=submission.attempt,
        retry_of=submission.retry_of,
        locks=submission.locks,
        blocked=submission.blocked,
        buckets=submission.buckets,
    )
