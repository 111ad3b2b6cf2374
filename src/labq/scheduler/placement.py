"""Placing a recipe set: a bipartite matching of recipes to viable systems.

Recipes with the same viability (same requirement signature, excludes and
group) are interchangeable, so the matching works on *classes* with a demand
count rather than on single recipes: a set of 128 identical recipes is one
class needing 128 systems. Augmenting paths (breadth-first, from a class with
unmet demand through systems already given to other classes) make the matching
maximum, so a set that can be placed is placed — first-fit is not enough when
one recipe's choice would starve another's.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Hashable, Iterable, Mapping, Sequence, Set
from typing import TypeVar

from labq.domain.model import AccessPolicy
from labq.scheduler.entries import RecipeEntry, SetEntry, SystemEntry
from labq.scheduler.freshness import Freshness
from labq.scheduler.index import ClassIndex, condition_allows, may_come_back

K = TypeVar("K", bound=Hashable)
S = TypeVar("S", bound=Hashable)


def gang_match(
    demands: Mapping[K, int],
    candidates: Mapping[K, Sequence[S]],
    *,
    taken: Iterable[S] = (),
) -> dict[K, list[S]]:
    """A maximum assignment of distinct systems to classes, at most ``demands[k]`` each.

    ``candidates[k]`` lists the systems class ``k`` may use, best first (earlier
    ones are preferred when several would do). Systems in ``taken`` are not used.
    The result may fall short of the demand: compare with :func:`is_complete`.
    """
    blocked = set(taken)
    owner: dict[S, K] = {}
    given: dict[K, list[S]] = {k: [] for k in demands}
    cursor = dict.fromkeys(demands, 0)
    for klass, demand in demands.items():
        for _ in range(demand):
            if not _take_free(klass, candidates, owner, blocked, given, cursor) and not _augment(
                klass, candidates, owner, blocked, given
            ):
                break
    return given


def is_complete(demands: Mapping[K, int], given: Mapping[K, Sequence[S]]) -> bool:
    """Whether every class got all the systems it asked for."""
    return all(len(given.get(k, ())) >= n for k, n in demands.items())


def _take_free(
    klass: K,
    candidates: Mapping[K, Sequence[S]],
    owner: dict[S, K],
    blocked: set[S],
    given: dict[K, list[S]],
    cursor: dict[K, int],
) -> bool:
    """The cheap path: the next never-used candidate, in preference order."""
    options = candidates.get(klass, ())
    i = cursor[klass]
    while i < len(options):
        system = options[i]
        i += 1
        if system not in owner and system not in blocked:
            cursor[klass] = i
            owner[system] = klass
            given[klass].append(system)
            return True
    cursor[klass] = i
    return False


def _augment(
    start: K,
    candidates: Mapping[K, Sequence[S]],
    owner: dict[S, K],
    blocked: set[S],
    given: dict[K, list[S]],
) -> bool:
    """Find a free system for ``start`` by moving other classes along an augmenting path."""
    came_from: dict[K, tuple[K, S] | None] = {start: None}
    queue: deque[K] = deque([start])
    while queue:
        klass = queue.popleft()
        for system in candidates.get(klass, ()):
            if system in blocked:
                continue
            holder = owner.get(system)
            if holder is None:
                _flip(klass, system, came_from, owner, given)
                return True
            if holder not in came_from:
                came_from[holder] = (klass, system)
                queue.append(holder)
    return False


def _flip(
    klass: K,
    system: S,
    came_from: Mapping[K, tuple[K, S] | None],
    owner: dict[S, K],
    given: dict[K, list[S]],
) -> None:
    """Walk the path back: each class takes the next system, giving up the one it had."""
    current: K | None = klass
    incoming: S = system
    while current is not None:
        owner[incoming] = current
        given[current].append(incoming)
        step = came_from[current]
        if step is None:
            return
        previous, handed_over = step
        given[current].remove(handed_over)
        incoming = handed_over
        current = previous


class Placer:
    """Which systems may serve which recipes now, and matchings of sets onto them.

    Dynamic viability (condition and pool access) is remembered until the
    systems change (:meth:`Freshness.systems_changed`). Among systems that
    would do, a set gets those the fewest waiting sets could use (the *demand*
    on a system), so rare systems stay free for the sets that need them; then
    by name.
    """

    def __init__(
        self,
        index: ClassIndex,
        systems: Mapping[str, SystemEntry],
        policy: AccessPolicy,
        waiting: Mapping[str, int],
        fresh: Freshness,
        virtual: Set[str] = frozenset(),
    ) -> None:
        self.index = index
        self.virtual = virtual  # VM slots: taken only when no physical system would do
        self.systems = systems
        self.policy = policy
        self.waiting = waiting  # class -> waiting sets with a recipe of it (the waitlist's)
        self._usable: dict[tuple[str, str, str | None], bool] = fresh.until_systems_change()
        self._pools: dict[tuple[str, str, str | None, bool], frozenset[str]] = (
            fresh.until_systems_change()
        )
        self._runnable: dict[tuple[str, str | None, bool, tuple[tuple[str, int], ...]], bool] = (
            fresh.until_systems_change()
        )

    def usable(self, system: SystemEntry, klass: str, group: str | None) -> bool:
        """Dynamic viability: condition and pool access (the class checked the rest)."""
        key = (system.fqdn, klass, group)
        known = self._usable.get(key)
        if known is None:
            known = condition_allows(system, self.index.classes[klass]) and (
                self.policy.maximum(system.pools, group) is not None
            )
            self._usable[key] = known
        return known

    def pool(
        self, lab: str, klass: str, group: str | None, *, ever: bool = False
    ) -> frozenset[str]:
        """The systems of ``lab`` a recipe of ``klass`` and ``group`` may use, whatever they do
        (``ever``: also manual ones, which may come back)."""
        key = (lab, klass, group, ever)
        found = self._pools.get(key)
        if found is None:
            klass_of = self.index.classes[klass]
            found = frozenset(
                f
                for f in self.index.systems_of[klass]
                if self.systems[f].lab == lab
                and (
                    may_come_back(self.systems[f], klass_of)
                    if ever
                    else condition_allows(self.systems[f], klass_of)
                )
                and self.policy.maximum(self.systems[f].pools, group) is not None
            )
            self._pools[key] = found
        return found

    def could_run(
        self, lab: str, demands: Mapping[str, int], group: str | None, *, ever: bool = False
    ) -> bool:
        """Whether ``lab`` could run a whole set of these demands once its systems are free."""
        key = (lab, group, ever, tuple(sorted(demands.items())))
        known = self._runnable.get(key)
        if known is None:
            pools = {k: self.pool(lab, k, group, ever=ever) for k in demands}
            if len(demands) == 1:
                ((klass, need),) = demands.items()
                known = len(pools[klass]) >= need
            else:
                options = {k: sorted(p) for k, p in pools.items()}
                known = is_complete(demands, gang_match(demands, options))
            self._runnable[key] = known
        return known

    def place(
        self,
        entry: SetEntry,
        lab: str,
        available: Set[str],
        *,
        every: bool = False,
        avoid: Set[str] = frozenset(),
    ) -> dict[int, str]:
        """A maximum matching of the set's unplaced recipes (``every``: all) onto ``available``.

        Systems in ``avoid`` (borrowed ones) are taken last, VM slots after them: a VM
        is made only for a recipe no available physical system can serve.
        """
        recipes = entry.recipes if every else entry.unplaced()
        by_class: dict[str, list[RecipeEntry]] = {}
        for recipe in recipes:
            by_class.setdefault(recipe.klass, []).append(recipe)
        if len(by_class) == 1:  # one class takes the first systems in order: only those
            ((key, wanted),) = by_class.items()
            pool = self.pool(lab, key, entry.group) & available
            candidates = {key: self._physical_first(pool, len(wanted), avoid)}
        else:
            candidates = {
                key: self._preferred(self.pool(lab, key, entry.group) & available)
                for key in by_class
            }
            if avoid or self.virtual:
                virtual = self.virtual
                candidates = {
                    k: sorted(v, key=lambda f: (f in virtual, f in avoid))
                    for k, v in candidates.items()
                }
        given = gang_match({k: len(v) for k, v in by_class.items()}, candidates)
        placement: dict[int, str] = {}
        for key, systems in given.items():
            for recipe, fqdn in zip(by_class[key], systems, strict=False):
                placement[recipe.id] = fqdn
        return placement

    def _physical_first(self, pool: Set[str], count: int, avoid: Set[str]) -> list[str]:
        """:meth:`_best` of the physical systems, then of the VM slots if they fall short."""
        virtual = pool & self.virtual if self.virtual else frozenset()
        if not virtual:
            return self._best(pool, count, avoid)
        out = self._best(pool - virtual, count, avoid)
        if len(out) < count:
            out += self._best(virtual, count - len(out), avoid)
        return out

    def demand(self, fqdn: str) -> int:
        """How many waiting sets have a recipe that could use the system."""
        return self._demand(self.index.kinds_of.get(fqdn, frozenset()))

    def _demand(self, kind: frozenset[str]) -> int:
        return sum(self.waiting.get(k, 0) for k in kind)

    def _best(self, systems: Set[str], count: int, avoid: Set[str]) -> list[str]:
        """The first ``count`` of ``systems`` in the order :meth:`_preferred` (then ``avoid``
        last) would give them, without sorting them all."""
        if len(systems) <= count:
            ordered = self._preferred(systems)
            return sorted(ordered, key=lambda f: f in avoid) if avoid else ordered
        if len(self.index.members) < len(systems):
            return self._best_by_kind(systems, count, avoid)
        kinds = self.index.kinds_of
        demand: dict[frozenset[str], int] = {}

        def key(fqdn: str) -> tuple[bool, int, str]:
            kind = kinds.get(fqdn, frozenset())
            if kind not in demand:
                demand[kind] = self._demand(kind)
            return (fqdn in avoid, demand[kind], fqdn)

        return heapq.nsmallest(count, systems, key=key)

    def _best_by_kind(self, systems: Set[str], count: int, avoid: Set[str]) -> list[str]:
        """:meth:`_best` through the kinds of system (fewer than the systems): each kind's
        systems are picked out with one set operation, and names compared without a key."""
        by_demand: dict[int, list[set[str]]] = {}
        for kind, alike in self.index.members.items():
            here = alike & systems
            if here:
                by_demand.setdefault(self._demand(kind), []).append(here)
        unknown = systems - self.index.kinds_of.keys()  # in no class at all: demand 0
        if unknown:
            by_demand.setdefault(0, []).append(set(unknown))
        out: list[str] = []
        for borrowed in (False, True):
            for level in sorted(by_demand):
                group = set().union(*by_demand[level])
                group = group & avoid if borrowed else group - avoid
                out += heapq.nsmallest(count - len(out), group)
                if len(out) == count:
                    return out
        return out

    def _preferred(self, systems: Iterable[str]) -> list[str]:
        found = sorted(systems)
        if len(found) < 2:
            return found
        kinds = self.index.kinds_of
        per_kind: dict[frozenset[str], int] = {}  # systems meeting the same classes share one
        demands = {}
        for fqdn in found:
            kind = kinds.get(fqdn, frozenset())
            if kind not in per_kind:
                per_kind[kind] = self._demand(kind)
            demands[fqdn] = per_kind[kind]
        if len(set(per_kind.values())) == 1:
            return found  # nothing to tell them apart: by name
        return sorted(found, key=demands.__getitem__)  # stable: by name within a demand
