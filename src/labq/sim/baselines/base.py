"""What every baseline policy shares: the books of systems and sets, and the moves.

A baseline keeps its own view of the world (which system serves which recipe,
which are free) and turns it into decisions for the simulator. The subclasses
only decide *which* set gets *which* free systems and when; this module makes
sure the decisions are legal: a system serves one recipe at a time, only
automated systems the recipe may use are given, a set starts only when every
recipe has its system, all in one lab.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping, Sequence

from labq.domain.distro import DistroRequirement, DistroTree
from labq.domain.locktable import Grant
from labq.domain.model import AccessPolicy
from labq.domain.priority import Priority
from labq.domain.requirements import Requirement, matches
from labq.domain.states import Condition, RecipeState
from labq.scheduler import decisions as d
from labq.scheduler.catalogue import Catalogue
from labq.scheduler.entries import RecipeSubmission, SchedulerConfig, SetSubmission, SystemEntry
from labq.scheduler.placement import gang_match, is_complete
from labq.sim.baselines.books import Placement, SetQueue, SetState

ClassKey = tuple[Requirement, frozenset[str], str | None, str | None, DistroRequirement | None]
_POTENTIAL = frozenset({Condition.AUTOMATED, Condition.MANUAL})  # may serve again one day


class Baseline:
    """The shared body of the baseline policies; subclasses override the hooks."""

    name = "baseline"
    polls = False

    def __init__(self, config: SchedulerConfig, access: AccessPolicy, rng: random.Random):
        self.config = config
        self.access = access
        self.rng = rng
        self.now = 0.0
        self.systems: dict[str, SystemEntry] = {}
        self.owner: dict[str, int] = {}  # system -> the recipe it serves
        self.free: dict[str, set[str]] = {}  # lab -> automated systems serving nobody
        self.sets: dict[int, SetState] = {}
        self.set_of: dict[int, int] = {}  # recipe id -> set id
        self.queue = SetQueue(self.queue_order)
        self.running = 0  # sets started and not finished
        self._classes: dict[ClassKey, int] = {}
        self._viable: list[dict[str, set[str]]] = []  # class id -> lab -> systems
        self._possible: dict[tuple[tuple[int, int], ...], list[str]] = {}
        self._systems_changed = False  # since the last consistency pass
        self._out: list[d.Decision] = []
        self._pending: set[str] = set()
        self._away_for: dict[str, set[str]] = {}  # system -> why it is away (hold_system)
        self._condition_before: dict[str, Condition] = {}  # system -> its own condition
        self.catalogue = Catalogue()  # the labs' distro trees, as the core keeps them
        # Whether anything happened since the last poll: a poll of an unchanged world
        # would find nothing to do, so it is skipped (traces poll for months).
        self.changed = True

    # --- hooks -----------------------------------------------------------------------

    def queue_order(self, state: SetState) -> tuple[int, float, int]:
        """The order of the waiting queue (smaller first)."""
        return state.order()

    def on_submit(self, states: Sequence[SetState]) -> None:
        """New sets arrived (after they were queued)."""
        self.schedule()

    def schedule(self) -> None:
        """Something changed: give free systems away (event-driven policies)."""

    def poll(self) -> None:
        """The timer fired (polling policies)."""

    # --- events --------------------------------------------------------------------------

    def add_system(self, system: SystemEntry, now: float) -> list[d.Decision]:
        """A system joins; an automated one is free at once."""
        self._begin(now)
        self.systems[system.fqdn] = system
        self.free.setdefault(system.lab, set())
        for key, cid in self._classes.items():
            if self._statically_viable(key, system):
                self._viable[cid].setdefault(system.lab, set()).add(system.fqdn)
        self._forget_possible()
        if system.condition is Condition.AUTOMATED:
            self._make_free(system.fqdn)
        self.schedule()
        return self._end()

    def change_condition(self, fqdn: str, condition: Condition, now: float) -> list[d.Decision]:
        """An admin changed a system's condition: held ones are let go, free ones follow."""
        self._begin(now)
        system = self.systems[fqdn]
        system.condition = condition
        self._forget_possible()
        recipe = self.owner.get(fqdn)
        if recipe is not None:
            state = self.sets[self.set_of[recipe]]
            if state.waiting and condition is not Condition.AUTOMATED:
                self.release(state, recipe, f"{fqdn} became {condition.value}")
        elif condition is Condition.AUTOMATED:
            self._make_free(fqdn)
        else:
            self.free[system.lab].discard(fqdn)
        self.schedule()
        return self._end()

    # The baselines know neither reservations nor paused queues: to them a system
    # reserved, loaned or in a paused lab is a manual one (forced recipes aside, the
    # same effect), and it gets its own condition back when the last reason ends.

    def hold_system(self, fqdn: str, person: str, now: float) -> list[d.Decision]:
        """A person takes the system: manual to the baseline until released."""
        self.systems[fqdn].held_by = person
        return self._away(fqdn, "person", True, now)

    def release_system(self, fqdn: str, now: float) -> list[d.Decision]:
        """A reservation or loan ended."""
        self.systems[fqdn].held_by = None
        return self._away(fqdn, "person", False, now)

    def pause_lab(self, lab: str, now: float) -> list[d.Decision]:
        """The lab's queue pauses: its systems are manual to the baseline until resumed."""
        found = sorted(f for f, s in self.systems.items() if s.lab == lab)
        return [x for f in found for x in self._away(f, "pause", True, now)]

    def resume_lab(self, lab: str, now: float) -> list[d.Decision]:
        """The lab's queue resumes."""
        found = sorted(f for f, s in self.systems.items() if s.lab == lab)
        return [x for f in found for x in self._away(f, "pause", False, now)]

    def _away(self, fqdn: str, why: str, on: bool, now: float) -> list[d.Decision]:
        reasons = self._away_for.setdefault(fqdn, set())
        was = bool(reasons)
        if on:
            reasons.add(why)
        else:
            reasons.discard(why)
        if was == bool(reasons):
            return []
        if reasons:
            self._condition_before[fqdn] = self.systems[fqdn].condition
            return self.change_condition(fqdn, Condition.MANUAL, now)
        return self.change_condition(fqdn, self._condition_before.pop(fqdn), now)

    def submit(self, sets: Sequence[SetSubmission], now: float) -> list[d.Decision]:
        """New sets: each is queued (or refused when no lab could ever run it)."""
        self._begin(now)
        states = []
        for sub in sets:
            state = self._register(sub)
            for recipe in sub.recipes:
                self._out.append(d.Enqueue(recipe.id, sub.id))
            if self.possible_labs(state):
                self.queue.add(state)
                states.append(state)
            else:
                self._refuse(state)
        self.on_submit(states)
        return self._end()

    def started(self, set_id: int, now: float) -> list[d.Decision]:
        """Recorded when the set was started; nothing to decide."""
        self._begin(now, event=False)
        return self._end()

    def finish(
        self, set_id: int, outcomes: Mapping[int, RecipeState], now: float
    ) -> list[d.Decision]:
        """A started set ended: its systems are free again. Baselines never retry."""
        self._begin(now)
        state = self.sets[set_id]
        if state.started_at is not None and not state.finished:
            self.running -= 1
        state.finished = True
        for recipe_id in list(state.placed):
            self._let_go(state, recipe_id)
        self.schedule()
        return self._end()

    def cancel(self, set_ids: Iterable[int], now: float) -> list[d.Decision]:
        """Waiting sets are cancelled at once, started ones are asked to stop."""
        self._begin(now)
        for set_id in set_ids:
            state = self.sets[set_id]
            if state.finished:
                continue
            if state.started_at is not None:
                self._out.append(d.Stop(set_id, "cancelled"))
                continue
            for recipe in state.sub.recipes:
                self._out.append(d.Cancel(recipe.id, set_id))
                if recipe.id in state.placed:
                    self._let_go(state, recipe.id)
            state.finished = True
        self.schedule()
        return self._end()

    def change_priority(
        self, set_ids: Iterable[int], priority: Priority, now: float
    ) -> list[d.Decision]:
        """A waiting set's priority changed: it moves in the queue."""
        self._begin(now)
        for set_id in set_ids:
            self.sets[set_id].priority = priority
        self.queue.resort()
        self.schedule()
        return self._end()

    def locks_held(
        self, set_id: int, grants: Sequence[Grant] | None, now: float
    ) -> list[d.Decision]:
        """What a running set holds: the baselines order their queues without locks."""
        return []

    def set_trees(self, lab: str, trees: Iterable[DistroTree], now: float) -> list[d.Decision]:
        """A lab's distro trees changed: viability is worked out again (rare); a waiting set
        lets go of systems that no longer serve it."""
        self._begin(now)
        if self.catalogue.carry(lab, tuple(trees)) is None:
            return self._end()
        for key, cid in self._classes.items():
            if key[4] is not None:
                self._viable[cid] = self._viable_for(key)
        self._forget_possible()
        for state in list(self.sets.values()):
            for recipe_id, fqdn in list(state.placed.items()):
                lab_of = self.systems[fqdn].lab
                if state.waiting and fqdn not in self._viable[state.klass[recipe_id]].get(
                    lab_of, ()
                ):
                    self.release(
                        state, recipe_id, f"lab {lab_of} no longer carries its distro tree"
                    )
        self.schedule()
        return self._end()

    def consistency_pass(self, now: float) -> list[d.Decision]:
        """Refuse waiting sets that no lab can run any more (systems broke or left)."""
        self._begin(now, event=False)
        if self._systems_changed:
            self._systems_changed = False
            for state in list(self.queue):
                if not self.possible_labs(state):
                    self._refuse(state)
            self.schedule()
        return self._end()

    def tick(self, now: float) -> list[d.Decision]:
        """The polling timer: only policies with ``polls`` do anything."""
        self._begin(now, event=False)
        if self.polls and self.changed:
            self.changed = False
            self.poll()
        return self._end()

    # --- what the subclasses use ------------------------------------------------------

    def candidates(self, recipe_class: int, lab: str, available: Collection[str]) -> list[str]:
        """Systems of ``lab`` in ``available`` that a recipe of this class may use, by name."""
        viable = self._viable[recipe_class].get(lab)
        if not viable:
            return []
        return sorted(viable.intersection(available))

    def fit(
        self, state: SetState, lab: str, available: Collection[str], *, shuffle: bool = False
    ) -> Placement:
        """A largest placement of the set's unplaced recipes on ``available`` systems of ``lab``.

        ``shuffle`` prefers systems in random order instead of by name.
        """
        by_class: dict[int, list[int]] = {}
        for recipe in state.unplaced():
            by_class.setdefault(state.klass[recipe.id], []).append(recipe.id)
        options = {cid: self.candidates(cid, lab, available) for cid in by_class}
        if shuffle:
            for systems in options.values():
                self.rng.shuffle(systems)
        if len(by_class) == 1:  # one kind of recipe (every trace job): no matching needed
            ((cid, ids),) = by_class.items()
            return dict(zip(ids, options[cid], strict=False))
        given = gang_match({cid: len(ids) for cid, ids in by_class.items()}, options)
        placement: Placement = {}
        for cid, systems in given.items():
            placement.update(zip(by_class[cid], systems, strict=False))
        return placement

    def fit_whole(
        self, state: SetState, lab: str, available: Collection[str], *, shuffle: bool = False
    ) -> Placement | None:
        """A placement for every unplaced recipe, or None."""
        missing = len(state.sub.recipes) - len(state.placed)
        if missing > len(available):
            return None
        placement = self.fit(state, lab, available, shuffle=shuffle)
        return placement if len(placement) == missing else None

    def gather(self, state: SetState, lab: str) -> None:
        """Hold as many of the set's recipes as can be placed on what it holds plus free systems.

        Held systems are matched again with the rest: a recipe that took the only
        system a sibling can use gives it up for another, so a set that can be
        completed never blocks itself.
        """
        held = dict(state.placed)
        mine = set(held.values())
        by_class: dict[int, list[int]] = {}
        for recipe in state.sub.recipes:
            by_class.setdefault(state.klass[recipe.id], []).append(recipe.id)
        options = {}
        for cid in by_class:  # what it holds first: the matching keeps it where it can
            usable = self.candidates(cid, lab, mine | self.free[lab])
            options[cid] = [f for f in usable if f in mine] + [f for f in usable if f not in mine]
        given = gang_match({cid: len(ids) for cid, ids in by_class.items()}, options)
        if sum(len(v) for v in given.values()) <= len(held):
            return
        wanted: Placement = {}
        for cid, systems in given.items():
            kept = [r for r in by_class[cid] if held.get(r) in systems]
            others = [r for r in by_class[cid] if r not in kept]
            keeping = {held[r] for r in kept}
            rest = [f for f in systems if f not in keeping]
            wanted.update({r: held[r] for r in kept})
            wanted.update(zip(others, rest, strict=False))
        for recipe_id, fqdn in held.items():
            if wanted.get(recipe_id) != fqdn:
                self.release(state, recipe_id, "its system went to a sibling", requeue=False)
        self.place(state, lab, {r: f for r, f in wanted.items() if held.get(r) != f})

    def possible_labs(self, state: SetState) -> list[str]:
        """Labs that could run the whole set once their systems are free (cached)."""
        demands: dict[int, int] = {}
        for cid in state.klass.values():
            demands[cid] = demands.get(cid, 0) + 1
        key = tuple(sorted(demands.items()))
        labs = self._possible.get(key)
        if labs is None:
            labs = []
            for lab in sorted(self.free):
                options = {
                    cid: [
                        f
                        for f in sorted(self._viable[cid].get(lab, ()))
                        if self.systems[f].condition in _POTENTIAL
                    ]
                    for cid in demands
                }
                if is_complete(demands, gang_match(demands, options)):
                    labs.append(lab)
            self._possible[key] = labs
        return labs

    def place(self, state: SetState, lab: str, placement: Placement) -> None:
        """Give each system of ``placement`` to its recipe (they become scheduled)."""
        state.lab = lab
        for recipe_id, fqdn in placement.items():
            if fqdn in self.owner or fqdn not in self.free[lab]:
                raise AssertionError(f"{self.name}: {fqdn} is not free")  # a bug in the policy
            self.free[lab].discard(fqdn)
            self.owner[fqdn] = recipe_id
            state.placed[recipe_id] = fqdn
            self._out.append(d.Schedule(recipe_id, state.id, fqdn))

    def start(self, state: SetState) -> None:
        """Every recipe has its system: the set runs."""
        assert state.lab is not None
        assert len(state.placed) == len(state.sub.recipes)
        state.started_at = self.now
        self.running += 1
        self._out.append(d.Start(state.id, state.lab))

    def release(
        self, state: SetState, recipe_id: int, reason: str, *, requeue: bool = True
    ) -> None:
        """Take a held system back from a recipe of a set that has not started."""
        fqdn = state.placed[recipe_id]
        self._out.append(d.Release(recipe_id, state.id, fqdn, reason))
        self._let_go(state, recipe_id)
        if requeue and not state.placed:  # holding nothing: back in the queue like any other
            state.lab = None
            for recipe in state.sub.recipes:
                self._out.append(d.Enqueue(recipe.id, state.id))

    def free_count(self) -> int:
        """Free systems over every lab."""
        return sum(len(f) for f in self.free.values())

    # --- books -----------------------------------------------------------------------

    def _register(self, sub: SetSubmission) -> SetState:
        if sub.id in self.sets:
            raise ValueError(f"recipe set {sub.id} is already known")
        classes = {r.id: self._class_of(r, sub.group) for r in sub.recipes}
        state = SetState(sub, sub.priority, classes)
        self.sets[sub.id] = state
        for recipe in sub.recipes:
            self.set_of[recipe.id] = sub.id
        return state

    def _class_of(self, recipe: RecipeSubmission, group: str | None) -> int:
        key: ClassKey = (recipe.requirement, recipe.excluded, recipe.force, group, recipe.distro)
        cid = self._classes.get(key)
        if cid is None:
            cid = len(self._viable)
            self._classes[key] = cid
            self._viable.append(self._viable_for(key))
        return cid

    def _viable_for(self, key: ClassKey) -> dict[str, set[str]]:
        viable: dict[str, set[str]] = {}
        for system in self.systems.values():
            if self._statically_viable(key, system):
                viable.setdefault(system.lab, set()).add(system.fqdn)
        return viable

    def _statically_viable(self, key: ClassKey, system: SystemEntry) -> bool:
        """Matches, not excluded, forced onto it if forced at all, the group may use it, and
        its lab carries the distro tree."""
        requirement, excluded, force, group, distro = key
        if system.fqdn in excluded or (force is not None and force != system.fqdn):
            return False
        if not self.catalogue.serves(system, distro):
            return False
        if self.access.maximum(system.pools, group) is None:
            return False
        return matches(requirement, system.facts)

    def _refuse(self, state: SetState) -> None:
        """No lab can run this set: abort it with a reason (nothing else could happen)."""
        message = "can never run: no lab has enough usable systems for every recipe of the set"
        for recipe in state.sub.recipes:
            if recipe.id in state.placed:
                self._let_go(state, recipe.id)
            self._out.append(d.Abort(recipe.id, state.id, message))
        state.finished = True
        self._out.append(d.SetError(state.id, message))

    def _let_go(self, state: SetState, recipe_id: int) -> None:
        fqdn = state.placed.pop(recipe_id)
        del self.owner[fqdn]
        if self.systems[fqdn].condition is Condition.AUTOMATED:
            self._make_free(fqdn)

    def _make_free(self, fqdn: str) -> None:
        self.free[self.systems[fqdn].lab].add(fqdn)
        self._pending.add(fqdn)

    def _forget_possible(self) -> None:
        self._possible.clear()
        self._systems_changed = True

    def _begin(self, now: float, *, event: bool = True) -> None:
        self.now = now
        self._out = []
        self.changed = self.changed or event

    def _end(self) -> list[d.Decision]:
        """The decisions; systems freed by this event that nobody took go idle."""
        for fqdn in sorted(self._pending):
            if fqdn not in self.owner and self.systems[fqdn].condition is Condition.AUTOMATED:
                self._out.append(d.Idle(fqdn))
        self._pending.clear()
        out, self._out = self._out, []
        return out
