"""The core's books: systems, sets and recipes, who holds what, what is free, what was decided.

The primitive moves here keep those consistent and write the decisions; which
set gets which system is decided elsewhere (the core, holds, backfill).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable

from labq.domain.states import Condition, RecipeState
from labq.scheduler import decisions as d
from labq.scheduler.entries import RecipeEntry, SchedulerConfig, SetEntry, SystemEntry
from labq.scheduler.order import Rank, rank

Requeue = Callable[[SetEntry, str], None]  # a waiting set's recipe of a class needs a system


class Books:
    """What the core knows right now, and the moves that change it."""

    def __init__(self, config: SchedulerConfig, requeue: Requeue) -> None:
        self.config = config
        self.requeue = requeue
        self.systems: dict[str, SystemEntry] = {}
        self.sets: dict[int, SetEntry] = {}
        self.recipes: dict[int, RecipeEntry] = {}
        self.free: dict[str, set[str]] = {}  # lab -> systems holding no recipe (not removed)
        self.pending: dict[str, set[str]] = {}  # lab -> systems freed, not offered yet
        self.holders: dict[str, set[int]] = {}  # lab -> sets holding systems, not started
        self.offers: deque[str] = deque()  # systems to offer, in order
        self.reopen: set[str] = set()  # labs whose free systems must be offered again
        self.out: list[d.Decision] = []
        self.now = 0.0
        self.epoch = 0  # bumped whenever the set of usable systems may change
        self.holds_moved: Counter[str] = Counter()  # lab -> when the backfill room may change
        self.placed_in: Counter[str] = Counter()  # lab -> whenever a system is given or taken

    def add_system(self, system: SystemEntry) -> None:
        """A system joins its lab (nothing offered yet)."""
        if system.fqdn in self.systems:
            raise ValueError(f"system {system.fqdn} is already known")
        system.recipe = None
        self.systems[system.fqdn] = system
        for per_lab in (self.free, self.pending):
            per_lab.setdefault(system.lab, set())
        self.holders.setdefault(system.lab, set())
        self.epoch += 1

    def rank_of(self, entry: SetEntry) -> Rank:
        """The set's global hold rank now."""
        return rank(entry, self.now, self.config)

    def available(self, lab: str) -> set[str]:
        """The lab's free systems, and those freed by this event and not yet offered."""
        return self.free[lab] | self.pending[lab]

    def available_count(self, lab: str) -> int:
        """How many systems :meth:`available` has (a system is never both free and pending)."""
        return len(self.free[lab]) + len(self.pending[lab])

    def give(self, entry: SetEntry, recipe: RecipeEntry, fqdn: str) -> None:
        """A free or pending system goes to the recipe (it becomes scheduled)."""
        system = self.systems[fqdn]
        assert system.recipe is None, f"{fqdn} is not free"
        self.free[system.lab].discard(fqdn)
        self.pending[system.lab].discard(fqdn)
        system.recipe = recipe.id
        recipe.system = fqdn
        recipe.state = RecipeState.SCHEDULED
        self.placed_in[system.lab] += 1
        self.out.append(d.Schedule(recipe.id, entry.id, fqdn))

    def take_back(self, recipe: RecipeEntry, reason: str) -> None:
        """A held, not started recipe lets go of its system: assigned again, back in the queue."""
        fqdn = recipe.system
        assert fqdn is not None
        system = self.systems[fqdn]
        system.recipe = None
        recipe.system = None
        recipe.state = RecipeState.ASSIGNED
        self.holds_moved[system.lab] += 1
        self.placed_in[system.lab] += 1
        self.out.append(d.Release(recipe.id, recipe.set_id, fqdn, reason))
        self.requeue(self.sets[recipe.set_id], recipe.klass)
        if system.condition is not Condition.REMOVED:
            self.make_pending(fqdn)

    def free_system(self, recipe: RecipeEntry) -> None:
        """A recipe ended: its system is pending (offered again), unless removed."""
        fqdn = recipe.system
        if fqdn is None:
            return
        recipe.system = None
        system = self.systems[fqdn]
        system.recipe = None
        if system.condition is not Condition.REMOVED:
            self.make_pending(fqdn)

    def make_pending(self, fqdn: str) -> None:
        """The pending-system event is due for this system."""
        lab = self.systems[fqdn].lab
        self.free[lab].discard(fqdn)
        if fqdn not in self.pending[lab]:
            self.pending[lab].add(fqdn)
            self.offers.append(fqdn)

    def admit(self, lab: str) -> None:
        """Something changed in the lab (a hold slot opened): offer its idle systems again."""
        for fqdn in sorted(self.free[lab]):
            if fqdn not in self.pending[lab]:
                self.offers.append(fqdn)
