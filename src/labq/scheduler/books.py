"""The core's books: systems, sets and recipes, who holds what, what is free, what was decided.

The primitive moves here keep those consistent and write the decisions; which
set gets which system is decided elsewhere (the core, holds, backfill). Nothing
outside writes the books' fields: others read them as mappings and change them
with the verbs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Set
from typing import Final

from labq.domain.states import Condition, RecipeState
from labq.scheduler import decisions as d
from labq.scheduler.entries import RecipeEntry, SchedulerConfig, SetEntry, SystemEntry
from labq.scheduler.freshness import Freshness
from labq.scheduler.order import Rank, rank
from labq.scheduler.waitlist import Waitlist


class Books:
    """What the core knows right now, and the moves that change it."""

    def __init__(self, config: SchedulerConfig, fresh: Freshness, waitlist: Waitlist) -> None:
        self.config = config
        self._fresh = fresh
        self._waitlist = waitlist  # a recipe taken back waits in the queue again
        self._systems: dict[str, SystemEntry] = {}
        self._sets: dict[int, SetEntry] = {}
        self._recipes: dict[int, RecipeEntry] = {}
        self._free: dict[str, set[str]] = {}  # lab -> systems holding no recipe (not removed)
        self._pending: dict[str, set[str]] = {}  # lab -> systems freed, not offered yet
        self._holders: dict[str, set[int]] = {}  # lab -> sets holding systems, not started
        self.virtual: Final[set[str]] = set()  # VM slots (docs/scheduling.md § VMs)
        self._offers: deque[str] = deque()  # systems to offer, in order
        self._reopened: set[str] = set()  # labs whose free systems must be offered again
        self._out: list[d.Decision] = []
        self._now = 0.0
        # called with ``now`` as each event begins (the planner raises overdue predictions)
        self.on_begin: list[Callable[[float], None]] = []
        # what others read: the same mappings, read-only (attributes: parts read them often)
        self.systems: Final[Mapping[str, SystemEntry]] = self._systems  # by name
        self.sets: Final[Mapping[int, SetEntry]] = self._sets  # by id, ended ones too
        self.recipes: Final[Mapping[int, RecipeEntry]] = self._recipes  # by id
        self.free: Final[Mapping[str, Set[str]]] = self._free  # lab -> idle systems
        self.holders: Final[Mapping[str, Set[int]]] = self._holders  # lab -> holding sets

    # --- reads ----------------------------------------------------------------------

    @property
    def now(self) -> float:
        """The time of the event being handled."""
        return self._now

    def rank_of(self, entry: SetEntry) -> Rank:
        """The set's global hold rank now."""
        return rank(entry, self._now, self.config)

    def available(self, lab: str) -> set[str]:
        """The lab's free systems, and those freed by this event and not yet offered."""
        return self._free[lab] | self._pending[lab]

    def available_count(self, lab: str) -> int:
        """How many systems :meth:`available` has (a system is never both free and pending)."""
        return len(self._free[lab]) + len(self._pending[lab])

    def is_pending(self, fqdn: str) -> bool:
        """Whether the system was freed and waits to be offered."""
        return fqdn in self._pending[self._systems[fqdn].lab]

    # --- an event's frame -------------------------------------------------------------

    def begin(self, now: float) -> None:
        """An event at ``now`` starts: time never goes back; nothing is decided yet."""
        if now < self._now:
            raise ValueError(f"time went backwards: {now} < {self._now}")
        self._now = now
        self._out = []
        for call in self.on_begin:
            call(now)

    def emit(self, decision: d.Decision) -> None:
        """Write a decision of this event."""
        self._out.append(decision)

    def decided(self) -> list[d.Decision]:
        """The decisions of this event, in order; the books start a fresh list."""
        out, self._out = self._out, []
        return out

    # --- systems, sets, recipes -------------------------------------------------------

    def add_system(self, system: SystemEntry) -> None:
        """A system joins its lab (nothing offered yet)."""
        if system.fqdn in self._systems:
            raise ValueError(f"system {system.fqdn} is already known")
        system.recipe = None
        self._systems[system.fqdn] = system
        if system.vm is not None:
            self.virtual.add(system.fqdn)
        for per_lab in (self._free, self._pending):
            per_lab.setdefault(system.lab, set())
        self._holders.setdefault(system.lab, set())
        self._fresh.systems_changed()

    def set_condition(self, fqdn: str, condition: Condition) -> SystemEntry:
        """An admin changed the system's condition."""
        system = self._systems[fqdn]
        system.condition = condition
        self._fresh.systems_changed()
        return system

    def hand_to(self, fqdn: str, person: str | None) -> SystemEntry:
        """A person takes the system (``None``: gives it back to the queue)."""
        system = self._systems[fqdn]
        system.held_by = person
        self._fresh.systems_changed()
        return system

    def add_set(self, entry: SetEntry) -> None:
        """A new set and its recipes."""
        for recipe in entry.recipes:
            self._recipes[recipe.id] = recipe
        self._sets[entry.id] = entry

    def place_restored(self, recipe: RecipeEntry, system: SystemEntry) -> None:
        """A restored recipe has this system (its decision was committed before a restart)."""
        system.recipe = recipe.id
        recipe.system = system.fqdn

    # --- who holds what ---------------------------------------------------------------

    def add_holder(self, entry: SetEntry, lab: str) -> None:
        """The set holds systems in ``lab`` now, without having started."""
        self._holders[lab].add(entry.id)
        self._fresh.holds_moved(lab)

    def drop_holder(self, entry: SetEntry) -> bool:
        """The set holds no more in its lab; whether it did."""
        lab = entry.lab
        if lab is None or entry.id not in self._holders.get(lab, set()):
            return False
        self._holders[lab].discard(entry.id)
        self._fresh.holds_moved(lab)
        return True

    def give(self, entry: SetEntry, recipe: RecipeEntry, fqdn: str) -> None:
        """A free or pending system goes to the recipe (it becomes scheduled)."""
        system = self._systems[fqdn]
        assert system.recipe is None, f"{fqdn} is not free"
        self._free[system.lab].discard(fqdn)
        self._pending[system.lab].discard(fqdn)
        system.recipe = recipe.id
        recipe.system = fqdn
        recipe.state = RecipeState.SCHEDULED
        self._fresh.placed(system.lab)
        self.emit(d.Schedule(recipe.id, entry.id, fqdn))

    def take_back(self, recipe: RecipeEntry, reason: str) -> None:
        """A held, not started recipe lets go of its system: assigned again, back in the queue."""
        fqdn = recipe.system
        assert fqdn is not None
        system = self._systems[fqdn]
        system.recipe = None
        recipe.system = None
        recipe.state = RecipeState.ASSIGNED
        self._fresh.holds_moved(system.lab)
        self._fresh.placed(system.lab)
        self.emit(d.Release(recipe.id, recipe.set_id, fqdn, reason))
        self._waitlist.requeue(self._sets[recipe.set_id], recipe.klass)
        if system.condition is not Condition.REMOVED:
            self.make_pending(fqdn)

    def free_system(self, recipe: RecipeEntry) -> None:
        """A recipe ended: its system is pending (offered again), unless removed."""
        fqdn = recipe.system
        if fqdn is None:
            return
        recipe.system = None
        system = self._systems[fqdn]
        system.recipe = None
        if system.condition is not Condition.REMOVED:
            self.make_pending(fqdn)

    # --- offers -----------------------------------------------------------------------

    def make_pending(self, fqdn: str) -> None:
        """The pending-system event is due for this system."""
        lab = self._systems[fqdn].lab
        self._free[lab].discard(fqdn)
        if fqdn not in self._pending[lab]:
            self._pending[lab].add(fqdn)
            self._offers.append(fqdn)

    def offer_again(self, fqdn: str) -> None:
        """Offer the system once more (a backfill started elsewhere in its stead)."""
        self._offers.append(fqdn)

    def withdraw(self, fqdn: str) -> None:
        """The system was removed: it is offered no more."""
        lab = self._systems[fqdn].lab
        self._free[lab].discard(fqdn)
        self._pending[lab].discard(fqdn)

    def unpend(self, fqdn: str) -> None:
        """The pending system needs no offer (it runs something now, or was removed)."""
        self._pending[self._systems[fqdn].lab].discard(fqdn)

    def idle(self, fqdn: str) -> None:
        """Nobody took the pending system: it is free, and said idle when automated."""
        system = self._systems[fqdn]
        self._pending[system.lab].discard(fqdn)
        self._free[system.lab].add(fqdn)
        if system.condition is Condition.AUTOMATED:
            self.emit(d.Idle(fqdn))

    def set_free(self, fqdn: str) -> None:
        """A restored system that holds no recipe is free (offered already, before a restart)."""
        self._free[self._systems[fqdn].lab].add(fqdn)

    def reopen(self, lab: str) -> None:
        """Something changed in the lab (a slot opened, a set became eligible): its idle
        systems must be offered again."""
        self._reopened.add(lab)

    def reopen_labs(self, labs: Iterable[str]) -> None:
        """:meth:`reopen` each of ``labs``."""
        self._reopened.update(labs)

    def reopen_all(self) -> None:
        """:meth:`reopen` every lab that has systems."""
        self._reopened.update(self._free.keys())

    def next_offer(self) -> str | None:
        """The next system to offer, in order (None: none is due)."""
        return self._offers.popleft() if self._offers else None

    def next_reopened(self) -> str | None:
        """The first reopened lab by name, taken off the list (None: none)."""
        if not self._reopened:
            return None
        lab = min(self._reopened)
        self._reopened.discard(lab)
        return lab

    def admit(self, lab: str) -> None:
        """Something changed in the lab (a hold slot opened): offer its idle systems again."""
        for fqdn in sorted(self._free[lab]):
            if fqdn not in self._pending[lab]:
                self._offers.append(fqdn)
