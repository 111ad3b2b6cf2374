"""The event-driven scheduler (DESIGN.md § Scheduling): events in, decisions out.

State lives in memory and is rebuilt by replaying submissions at start; the
core never reads a clock (every event carries ``now``), a database or a process.

How a free system is given away (the pending-system event), in the system's
order (effective priority, nominal priority, weight, submit time, id):

1. a set already holding systems in the lab takes it;
2. a set that can start at once with it (and the lab's free systems) takes
   them all, unless that delays a higher-ranked holder (EASY backfill);
3. a set that may hold here (a hold slot is free, or it outranks the lowest
   holder, whose holds it then takes back) starts holding with it;
4. else the next candidate is asked; if none, the system goes idle.

After every gain the holders of the lab are tried in rank order: a holder that
can complete with free systems and systems held by lower-ranked holders takes
them (wound-wait) and starts. Ranks do not depend on systems, so the best-ranked
holder of a lab can always finish once enough systems stop running: no cycle of
sets waiting on each other can form.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from labq.domain.locktable import Grant
from labq.domain.model import AccessPolicy
from labq.domain.priority import Priority
from labq.domain.states import Condition, RecipeState
from labq.scheduler import decisions as d
from labq.scheduler.admission import Admission
from labq.scheduler.backfill import delays_a_holder, free_times, start_given
from labq.scheduler.consistency import possible_labs, repair
from labq.scheduler.entries import (
    Eligibility,
    RecipeEntry,
    SchedulerConfig,
    SetEntry,
    SetSubmission,
    SystemEntry,
    ViabilityClass,
)
from labq.scheduler.index import ClassIndex, Queue, condition_allows
from labq.scheduler.lending import lendable, spares
from labq.scheduler.order import Rank, age_of, predictive_weight, rank
from labq.scheduler.placement import gang_match
from labq.scheduler.predictive import RunningLocks, declared, held
from labq.scheduler.retry import retry_decision

Placement = dict[int, str]  # recipe id -> system
Choice = tuple[str, SetEntry, Placement]  # ("start" | "grow" | "hold", set, systems)
# Per offer: set id -> its sorted free times; "available" -> the lab's free systems.
FreeTimes = dict[Any, Any]


class Scheduler:
    """The scheduling core. Each public method is one event; it returns the decisions."""

    def __init__(self, config: SchedulerConfig | None = None, policy: AccessPolicy | None = None):
        self.config = config or SchedulerConfig()
        self.policy = policy or AccessPolicy()
        self.systems: dict[str, SystemEntry] = {}
        self.sets: dict[int, SetEntry] = {}
        self.recipes: dict[int, RecipeEntry] = {}
        self.index = ClassIndex()
        self.queue = Queue()
        self.free: dict[str, set[str]] = {}  # lab -> systems holding no recipe (not removed)
        self.holders: dict[str, set[int]] = {}  # lab -> sets holding systems, not started
        self.admission = Admission(self.config)
        self.running_locks = RunningLocks(self.config.lock_levels)
        self.declaring: set[int] = set()  # waiting sets whose spv depends on running sets
        self._reopen: set[str] = set()  # labs whose free systems must be offered again
        self._out: list[d.Decision] = []
        self._offers: deque[str] = deque()
        self._pending: set[str] = set()
        self._now = 0.0
        self._epoch = 0  # bumped whenever the set of usable systems may change
        self._possible: dict[tuple[int, str], tuple[int, bool]] = {}
        self._usable_memo: dict[tuple[str, str, str | None], bool] = {}
        self._placements = 0  # bumped whenever a recipe gets or loses a system
        self._cache: FreeTimes = {}
        self._cache_version: tuple[int, int] = (-1, -1)
        self._usable_epoch = 0

    # --- events ---------------------------------------------------------------

    def add_system(self, system: SystemEntry, now: float) -> list[d.Decision]:
        """A system joins a lab; an automated one is pending at once (seed 000)."""
        self._begin(now)
        if system.fqdn in self.systems:
            raise ValueError(f"system {system.fqdn} is already known")
        system.recipe = None
        self.systems[system.fqdn] = system
        self.index.add_system(system)
        self._epoch += 1
        self.free.setdefault(system.lab, set())
        self.holders.setdefault(system.lab, set())
        if system.condition is not Condition.REMOVED:
            self._make_pending(system.fqdn)
        return self._finish()

    def change_condition(self, fqdn: str, condition: Condition, now: float) -> list[d.Decision]:
        """An admin changed a system's condition."""
        self._begin(now)
        system = self.systems[fqdn]
        system.condition = condition
        self._epoch += 1
        if system.recipe is not None:
            holder = self.sets[self.recipes[system.recipe].set_id]
            if not holder.started and not self._usable(system, self.recipes[system.recipe]):
                self._release(self.recipes[system.recipe], f"{fqdn} became {condition.value}")
                self._settle_holder(holder)
        elif condition is Condition.REMOVED:
            self.free[system.lab].discard(fqdn)
            self._pending.discard(fqdn)
        else:
            self._make_pending(fqdn)
        return self._finish()

    def submit(self, sets: Sequence[SetSubmission], now: float) -> list[d.Decision]:
        """The new-job event: try to place each new set on free systems."""
        self._begin(now)
        for submission in sets:
            entry = self._register(submission)
            self._place_new(entry)
            self._drain()
        return self._finish()

    def started(self, set_id: int, now: float) -> list[d.Decision]:
        """Nothing to decide: recorded so backfill can estimate when systems free up."""
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
        aborted_on: dict[int, str] = {}
        for recipe in entry.recipes:
            outcome = outcomes.get(recipe.id, RecipeState.COMPLETED)
            if not outcome.is_final:
                raise ValueError(f"recipe {recipe.id} cannot finish as {outcome.value}")
            if outcome is RecipeState.ABORTED and recipe.system is not None:
                aborted_on[recipe.id] = recipe.system
            recipe.state = outcome
            self._free_system(recipe)
        entry.finished = True
        self._forget_holder(entry)
        if entry.started and entry.lab is not None:
            self._account_finish(entry, entry.lab)
        decision = retry_decision(self, entry, aborted_on)
        if decision is not None:
            self._out.append(decision)
        self._drain()
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
                self._out.append(d.Stop(set_id, reason))
                continue
            for recipe in entry.recipes:
                recipe.state = RecipeState.CANCELLED
                self._out.append(d.Cancel(recipe.id, set_id))
                self._free_system(recipe)
            entry.finished = True
            self.declaring.discard(entry.id)
            self.admission.leave(entry)
            self._forget_holder(entry)
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
                self._complete_holders(entry.lab)
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
                self._reopen.add(lab)
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
        """The slow safety net: abort what can never run, repair holds that went bad."""
        self._begin(now)
        repair(self)
        self._drain()
        return self._finish()

    # --- queries used by the policy modules and the tests -----------------------

    @property
    def now(self) -> float:
        """The time of the event being handled."""
        return self._now

    def rank_of(self, entry: SetEntry) -> Rank:
        """The set's global hold rank now."""
        return rank(entry, self._now, self.config)

    def weight_of(self, entry: SetEntry) -> float:
        """The set's predictive weight now (0 with the predictive order off)."""
        return predictive_weight(entry, self._now, self.config)

    def age_ticks_of(self, entry: SetEntry, now: float | None = None) -> int:
        """How many ticks the set has waited."""
        return age_of(entry, self._now if now is None else now, self.config)

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
            self.admission.slot_reason(lab)
            for lab in sorted(self.free)
            if self.could_run_in(entry, lab)
        ]
        if reasons and all(reasons):
            return "; ".join(dict.fromkeys(r for r in reasons if r))
        return None

    def klass(self, recipe: RecipeEntry) -> ViabilityClass:
        """The viability class of a recipe."""
        return self.index.classes[recipe.klass]

    def viable_systems(
        self, entry: SetEntry, recipe: RecipeEntry, lab: str | None = None
    ) -> list[str]:
        """Systems that may serve ``recipe`` now, whatever they are doing, in a stable order."""
        out = []
        for fqdn in self.index.systems_of[recipe.klass]:
            system = self.systems[fqdn]
            if (lab is None or system.lab == lab) and self._usable(system, recipe, entry):
                out.append(fqdn)
        return sorted(out)

    def could_run_in(self, entry: SetEntry, lab: str) -> bool:
        """Whether the lab's systems could run the whole set once free (cached per change)."""
        key = (entry.id, lab)
        cached = self._possible.get(key)
        if cached is None or cached[0] != self._epoch:
            cached = (self._epoch, lab in possible_labs(self, entry, only=lab))
            self._possible[key] = cached
        return cached[1]

    # --- placing sets -------------------------------------------------------------

    def _register(self, submission: SetSubmission) -> SetEntry:
        if submission.id in self.sets:
            raise ValueError(f"recipe set {submission.id} is already known")
        recipes = []
        for index, spec in enumerate(submission.recipes):
            klass = ViabilityClass(spec.requirement, spec.excluded, spec.force)
            key = self.index.add_class(klass)
            recipe = RecipeEntry(spec.id, submission.id, index, key, spec.role)
            self.recipes[spec.id] = recipe
            recipes.append(recipe)
        entry = SetEntry(
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
        self.sets[entry.id] = entry
        entry.spv = self.running_locks.spv(entry.locks, self.config.spv_base)
        if entry.locks.levels and not entry.locks.whole_lab:
            self.declaring.add(entry.id)
        self.admission.join(entry)
        entry.throttle = self.admission.throttle_of(entry)
        self._requeue_all(entry)
        return entry

    def _requeue_all(self, entry: SetEntry) -> None:
        for key in {r.klass for r in entry.unplaced()}:
            self.queue.push(entry, key)

    def _place_new(self, entry: SetEntry) -> None:
        """Start the set on free systems if it fits whole; else hold where allowed; else queue."""
        best: tuple[int, str, Placement] | None = None
        labs = [] if not entry.eligible else sorted(self.free.keys() - self.admission.paused)
        for lab in labs:
            cache = self._shared_cache()
            available = self._available(lab)
            lent = (
                set()
                if len(entry.unplaced()) <= len(available)
                else lendable(self, entry, lab, cache)
            )
            placement = self._placement(entry, lab, available | lent, avoid=lent)
            whole = len(placement) == len(entry.unplaced())
            if (
                whole
                and self.admission.slot_free(lab)
                and self._backfill_ok(entry, lab, placement, cache)
            ):
                self._start(entry, lab, placement)
                return
            if lent:  # a hold never borrows
                placement = self._placement(entry, lab, available)
            if placement and (best is None or len(placement) > best[0]):
                best = (len(placement), lab, placement)
        if (
            best is not None
            and self.admission.slot_free(best[1])
            and self.could_run_in(entry, best[1])
            and self._may_hold(entry, best[1])
        ):
            self._hold(entry, best[1], best[2])
            return
        for recipe in entry.recipes:
            if recipe.state is RecipeState.NEW:
                recipe.state = RecipeState.QUEUED
                self._out.append(d.Enqueue(recipe.id, entry.id))

    def _available(self, lab: str) -> set[str]:
        return self.free[lab] | {f for f in self._pending if self.systems[f].lab == lab}

    def _placement(
        self,
        entry: SetEntry,
        lab: str,
        available: set[str],
        *,
        rematch: bool = False,
        avoid: set[str] | frozenset[str] = frozenset(),
    ) -> Placement:
        """A maximum matching of the set's recipes to ``available`` systems in ``lab``.

        Normally only unplaced recipes are matched; with ``rematch`` every recipe
        is, over its own holds too, so a set can rearrange what it holds (a generic
        recipe may be sitting on the one system a picky recipe needs).
        """
        recipes = entry.recipes if rematch else entry.unplaced()
        if rematch:
            available = available | {r.system for r in entry.recipes if r.system is not None}
        by_class: dict[str, list[RecipeEntry]] = {}
        for recipe in recipes:
            by_class.setdefault(recipe.klass, []).append(recipe)
        candidates = {
            key: sorted(
                (
                    f
                    for f in self.index.systems_of[key] & available
                    if self.systems[f].lab == lab and self._usable(self.systems[f], group[0], entry)
                ),
                key=lambda f: (f in avoid, f),  # free systems before borrowed ones
            )
            for key, group in by_class.items()
        }
        given = gang_match({k: len(v) for k, v in by_class.items()}, candidates)
        placement: Placement = {}
        for key, systems in given.items():
            for recipe, fqdn in zip(by_class[key], systems, strict=False):
                placement[recipe.id] = fqdn
        return placement

    def _usable(
        self, system: SystemEntry, recipe: RecipeEntry, entry: SetEntry | None = None
    ) -> bool:
        """Dynamic viability: condition and pool access (the class checked the rest).

        Remembered until a system or its condition changes (the ``_epoch``); the
        access policy only changes by replacing the scheduler.
        """
        entry = entry or self.sets[recipe.set_id]
        if self._usable_epoch != self._epoch:
            self._usable_memo.clear()
            self._usable_epoch = self._epoch
        key = (system.fqdn, recipe.klass, entry.group)
        known = self._usable_memo.get(key)
        if known is None:
            known = condition_allows(system, self.index.classes[recipe.klass]) and (
                self.policy.maximum(system.pools, entry.group) is not None
            )
            self._usable_memo[key] = known
        return known

    def _start(self, entry: SetEntry, lab: str, placement: Placement) -> None:
        self._bind(entry, lab, placement)
        self._forget_holder(entry)
        entry.started_at = self._now
        entry.held_since = None
        self._out.append(d.Start(entry.id, lab))
        self._account_start(entry, lab)

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
            return self.running_locks.put(entry.id, held(grants, levels, entry.locks))
        return self.running_locks.put(entry.id, declared(entry.locks, levels))

    def _account_finish(self, entry: SetEntry, lab: str) -> None:
        buckets, reopened = self.admission.finished(entry, lab)
        self._reopen.update(self.free.keys() if reopened is None else reopened)
        self._rethrottle(buckets)
        if self.running_locks.remove(entry.id):
            self._refresh_spv()

    def _refresh_spv(self) -> None:
        """The running sets changed: re-key the waiting sets whose spv changed with them."""
        base = self.config.spv_base
        for set_id in list(self.declaring):
            entry = self.sets[set_id]
            if not entry.waiting:
                self.declaring.discard(set_id)
                continue
            value = self.running_locks.spv(entry.locks, base)
            if value != entry.spv:
                entry.spv = value
                entry.version += 1
                self._requeue_all(entry)

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
            if entry.lab is not None and not entry.started:
                self._unhold(entry, f"it may not run now: {self.waits_for(entry)}")
            return
        self._requeue_all(entry)
        self._reopen.update(self.free.keys())

    def _hold(self, entry: SetEntry, lab: str, placement: Placement) -> None:
        """Make the set a holder in ``lab`` with these systems; its other recipes are assigned."""
        self.holders[lab].add(entry.id)
        entry.held_since = self._now
        self._bind(entry, lab, placement)
        more = self._placement(entry, lab, self._available(lab))
        if more:
            self._bind(entry, lab, more)
        for recipe in entry.recipes:
            if recipe.system is None and recipe.state is not RecipeState.ASSIGNED:
                recipe.state = RecipeState.ASSIGNED
                self._out.append(d.Assign(recipe.id, entry.id))
        self._complete_holders(lab)

    def _bind(self, entry: SetEntry, lab: str, placement: Placement) -> None:
        entry.lab = lab
        for recipe_id, fqdn in placement.items():
            recipe = self.recipes[recipe_id]
            system = self.systems[fqdn]
            if system.recipe is not None:
                victim = self.recipes[system.recipe]
                owner = self.sets[victim.set_id]
                if self.rank_of(owner) > self.rank_of(entry):
                    reason = f"lent to set {entry.id}, which ends before this set could start"
                else:
                    reason = f"taken by higher-ranked set {entry.id}"
                self._release(victim, reason)
                self._settle_holder(owner)
            self.free[lab].discard(fqdn)
            self._pending.discard(fqdn)
            system.recipe = recipe_id
            recipe.system = fqdn
            self._placements += 1
            recipe.state = RecipeState.SCHEDULED
            self._out.append(d.Schedule(recipe_id, entry.id, fqdn))

    # --- holds ---------------------------------------------------------------------

    def _may_hold(self, entry: SetEntry, lab: str) -> bool:
        """A free hold slot, or a lower-ranked holder whose slot this set may take."""
        holders = self.holders[lab]
        if len(holders) < self.config.holds_per_lab:
            return True
        if not holders:
            return False
        lowest = min(holders, key=lambda h: self.rank_of(self.sets[h]))
        if self.rank_of(self.sets[lowest]) >= self.rank_of(entry):
            return False
        self._unhold(self.sets[lowest], f"its hold slot went to higher-ranked set {entry.id}")
        return True

    def _unhold(self, entry: SetEntry, reason: str) -> None:
        """Give back everything a holder holds; its recipes go back to the queue."""
        for recipe in entry.placed():
            self._release(recipe, reason)
        self._settle_holder(entry)

    def _release(self, recipe: RecipeEntry, reason: str) -> None:
        fqdn = recipe.system
        assert fqdn is not None
        self.systems[fqdn].recipe = None
        recipe.system = None
        self._placements += 1
        recipe.state = RecipeState.ASSIGNED
        self._out.append(d.Release(recipe.id, recipe.set_id, fqdn, reason))
        self.queue.push(self.sets[recipe.set_id], recipe.klass)
        if self.systems[fqdn].condition is not Condition.REMOVED:
            self._make_pending(fqdn)

    def _settle_holder(self, entry: SetEntry) -> None:
        """A holder left with no system is a holder no more: back to the queue."""
        if entry.placed() or entry.lab is None or entry.started or entry.finished:
            return
        self.holders[entry.lab].discard(entry.id)
        self._admit(entry.lab)
        entry.lab = None
        entry.held_since = None
        for recipe in entry.recipes:
            if recipe.state is RecipeState.ASSIGNED:
                recipe.state = RecipeState.QUEUED
                self._out.append(d.Enqueue(recipe.id, entry.id))

    def _forget_holder(self, entry: SetEntry) -> None:
        if entry.lab is not None and entry.id in self.holders.get(entry.lab, set()):
            self.holders[entry.lab].discard(entry.id)
            self._admit(entry.lab)

    def _complete_holders(self, lab: str) -> None:
        """Holders, best rank first, complete from free systems and lower holders' holds."""
        progress = True
        while progress and self.admission.slot_free(lab):
            progress = False
            ranked = sorted(
                self.holders[lab], key=lambda h: self.rank_of(self.sets[h]), reverse=True
            )
            for position, holder_id in enumerate(ranked):
                holder = self.sets[holder_id]
                lower = {
                    r.system
                    for h in ranked[position + 1 :]
                    for r in self.sets[h].placed()
                    if r.system is not None
                }
                pool = self._available(lab) | lower
                if len(pool) < len(holder.unplaced()):
                    continue  # cannot complete: skip the matching
                placement = self._placement(holder, lab, pool, rematch=True)
                if len(placement) < len(holder.recipes):
                    continue
                # starting turns holds into running systems nobody can take back:
                # the same backfill rule as for any set applies against better holders
                if delays_a_holder(self, holder, lab, set(placement.values())):
                    continue
                self._rearrange(holder, placement)
                self._start(holder, lab, {})
                progress = True
                break

    def _rearrange(self, entry: SetEntry, placement: Placement) -> None:
        """Let go of own holds the new placement moves elsewhere, then take the new ones."""
        for recipe in entry.placed():
            if placement.get(recipe.id) != recipe.system:
                self._release(recipe, "rearranged within its own set")
        moved = {rid: f for rid, f in placement.items() if self.recipes[rid].system != f}
        if moved:
            assert entry.lab is not None
            self._bind(entry, entry.lab, moved)

    def _admit(self, lab: str) -> None:
        """A hold slot opened: offer the lab's idle systems again."""
        for fqdn in sorted(self.free[lab]):
            if fqdn not in self._pending:
                self._offers.append(fqdn)

    # --- the pending-system event ---------------------------------------------------

    def _make_pending(self, fqdn: str) -> None:
        system = self.systems[fqdn]
        self.free[system.lab].discard(fqdn)
        if fqdn not in self._pending:
            self._pending.add(fqdn)
            self._offers.append(fqdn)

    def _free_system(self, recipe: RecipeEntry) -> None:
        fqdn = recipe.system
        if fqdn is None:
            return
        recipe.system = None
        self._placements += 1
        system = self.systems[fqdn]
        system.recipe = None
        if system.condition is not Condition.REMOVED:
            self._make_pending(fqdn)

    def _drain(self) -> None:
        while self._offers or self._reopen:
            if not self._offers:
                lab = min(self._reopen)  # a slot opened or a set became eligible
                self._reopen.discard(lab)
                self._complete_holders(lab)
                self._admit(lab)
                continue
            fqdn = self._offers.popleft()
            system = self.systems[fqdn]
            if system.recipe is not None or system.condition is Condition.REMOVED:
                self._pending.discard(fqdn)
                continue
            was_pending = fqdn in self._pending
            if self._offer(system):
                continue
            if was_pending:
                self._pending.discard(fqdn)
                self.free[system.lab].add(fqdn)
                if system.condition is Condition.AUTOMATED:
                    self._out.append(d.Idle(fqdn))
            if self.holders[system.lab]:
                # a holder may use it indirectly, by moving one of its own recipes onto it
                self._complete_holders(system.lab)

    def _offer(self, system: SystemEntry) -> bool:
        """Give one free system to the best candidate allowed to take it.

        If that candidate would only sit on the system (it holds, or starts
        holding, but cannot start yet), a later candidate that can start at once
        and end before the first could start gets it instead (EASY backfill).
        """
        lab = system.lab
        if lab in self.admission.paused:
            return False
        gate = self.admission.slot_free(lab)  # closed: sets may hold and grow, not start
        skipped = 0
        classes = self.index.classes_of.get(system.fqdn, set())
        candidates = self.queue.candidates(
            system, classes, self.sets, self.policy, self._now, self.config
        )
        first: Choice | None = None
        backfill: Choice | None = None
        looked = 0
        cache = self._shared_cache()
        try:
            for entry, key in candidates:
                choice = self._consider(system, entry, key, lab, cache)
                if choice is None:
                    skipped += 1
                    if not gate and skipped > self.config.backfill_depth:
                        break  # nobody may start here: do not walk the whole queue for a hold
                    continue
                if first is None:
                    first = choice
                    if not gate or choice[0] == "start":
                        break
                    if self._completes_with(entry, lab, system):
                        break
                    continue
                looked += 1
                if choice[0] == "start" and not self._delays(
                    first[1], entry, lab, choice[2], cache
                ):
                    backfill = choice
                    break
                if looked >= self.config.backfill_depth:
                    break
        finally:
            candidates.close()
        chosen = backfill or first
        if chosen is None:
            return False
        return self._take(chosen, lab)

    def _take(self, choice: Choice, lab: str) -> bool:
        how, entry, placement = choice
        if how == "start":
            self._start(entry, lab, placement)
        elif how == "grow":
            self._bind(entry, lab, placement)
            self._complete_holders(lab)
        elif self._may_hold(entry, lab):
            self._hold(entry, lab, placement)
        else:
            return False
        return True

    def _shared_cache(self) -> FreeTimes:
        """Free times and lendable systems worked out this event, while no placement changed."""
        version = (self._placements, self._epoch)
        if self._cache_version != version:
            self._cache = {}
            self._cache_version = version
        return self._cache

    def _completes_with(self, entry: SetEntry, lab: str, system: SystemEntry) -> bool:
        """Whether the set could start now with this system and the lab's free ones."""
        missing = len(entry.unplaced())
        available = self._available(lab) | {system.fqdn}
        if missing > len(available):
            return False
        return len(self._placement(entry, lab, available)) == missing

    def _delays(
        self, first: SetEntry, other: SetEntry, lab: str, placement: Placement, cache: FreeTimes
    ) -> bool:
        """Whether starting ``other`` on these systems could push back ``first``'s start."""
        if other.max_time is None:
            return True
        if cache.get(first.id) is None:  # the same for every candidate of one offer
            cache[first.id] = free_times(self, first, lab)
        missing = len(first.unplaced())
        start = start_given(cache[first.id], missing, self._now, set(placement.values()))
        return self._now + other.max_time > start

    def _consider(
        self, system: SystemEntry, entry: SetEntry, key: str, lab: str, cache: FreeTimes
    ) -> Choice | None:
        if entry.lab not in (None, lab) or not entry.waiting or not entry.eligible:
            return None
        unplaced = entry.unplaced()
        recipe = next(r for r in unplaced if r.klass == key)
        if not self._usable(system, recipe, entry):
            return None
        if entry.id in self.holders[lab]:
            return ("grow", entry, {recipe.id: system.fqdn})
        if ("available", system.fqdn) not in cache:  # the lab's free systems, once per offer
            cache[("available", system.fqdn)] = self._available(lab) | {system.fqdn}
        available = cache[("available", system.fqdn)]
        lent: set[str] = set()
        if len(unplaced) > len(available):  # free systems are not enough: can it borrow?
            spare = sum(len(v) for v in spares(self, lab, cache).values())
            if len(unplaced) <= len(available) + spare:
                lent = lendable(self, entry, lab, cache)
                available = available | lent
        if len(unplaced) <= len(available):  # else it cannot fit: skip the matching
            placement = self._placement(entry, lab, available, avoid=lent)
            whole = len(placement) == len(unplaced) and system.fqdn in placement.values()
            if (
                whole
                and self.admission.slot_free(lab)
                and self._backfill_ok(entry, lab, placement, cache)
            ):
                return ("start", entry, placement)
        if self._could_hold(entry, lab) and self.could_run_in(entry, lab):
            partial = {recipe.id: system.fqdn}
            return ("hold", entry, partial)
        return None

    def _could_hold(self, entry: SetEntry, lab: str) -> bool:
        if not self.admission.slot_free(lab):
            return False  # no new holds where nothing may start: the set may go elsewhere
        holders = self.holders[lab]
        if len(holders) < self.config.holds_per_lab:
            return True
        return any(self.rank_of(self.sets[h]) < self.rank_of(entry) for h in holders)

    def _backfill_ok(
        self, entry: SetEntry, lab: str, placement: Placement, cache: FreeTimes | None = None
    ) -> bool:
        return not delays_a_holder(self, entry, lab, set(placement.values()), cache)

    # --- bookkeeping ---------------------------------------------------------------

    def _begin(self, now: float) -> None:
        if now < self._now:
            raise ValueError(f"time went backwards: {now} < {self._now}")
        self._now = now
        self._cache_version = (-1, -1)  # times computed at another instant are stale
        self._out = []

    def _finish(self) -> list[d.Decision]:
        self._drain()
        out, self._out = self._out, []
        return out
