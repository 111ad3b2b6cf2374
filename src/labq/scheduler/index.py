"""Indexes that let an event cost about the number of signatures a system meets.

- ``classes``: every viability class in use, with the systems that meet it and,
  per system, the classes it meets (computed once per new class or system).
- ``queue``: per (class, group, nominal priority) a heap of waiting sets in
  submit order. Within one such heap aging keeps that order (the earlier set has
  waited longer), and a group's cap on a system is the same for every entry, so
  the best candidate for a system is always at the top of one of the heaps the
  system's classes lead to. Entries are removed lazily.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field

from labq.domain.model import EVERYBODY, AccessPolicy
from labq.domain.priority import Priority
from labq.domain.requirements import AllOf, Compare, Requirement, exact, matches
from labq.domain.states import Condition
from labq.scheduler.catalogue import Catalogue
from labq.scheduler.entries import SchedulerConfig, SetEntry, SystemEntry, ViabilityClass
from labq.scheduler.freshness import Freshness
from labq.scheduler.order import OrderKey, order_key

HeapItem = tuple[float, int, int]  # (submitted, set id, version)
# (class, cell, group, (priority, spv key))
Where = tuple[str, tuple[int, float], str, tuple[int, int]]
Merge = tuple[tuple[float, ...], Where, list[HeapItem]]


def meets(system: SystemEntry, klass: ViabilityClass) -> bool:
    """The static part of viability: requirement, excludes and force."""
    if system.fqdn in klass.excluded:
        return False
    if klass.force is not None and klass.force != system.fqdn:
        return False
    return matches(klass.requirement, system.facts)


def condition_allows(system: SystemEntry, klass: ViabilityClass) -> bool:
    """Automated systems serve everyone; forced recipes accept any but removed ones.

    A system reserved or loaned to a person serves no recipe until it is released.
    """
    if system.held_by is not None:
        return False
    if klass.force is not None:
        return system.condition is not Condition.REMOVED
    return system.condition is Condition.AUTOMATED


# Conditions a system may come back from to serve again (docs/scheduling.md, "ever"):
# only removed systems are gone; a set waiting for broken or manual ones waits.
POTENTIAL = frozenset({Condition.AUTOMATED, Condition.MANUAL, Condition.BROKEN})


def may_come_back(system: SystemEntry, klass: ViabilityClass) -> bool:
    """A system that serves now, or may again once an admin makes it automated (broken and
    manual ones may; removed ones never)."""
    if klass.force is not None:
        return system.condition is not Condition.REMOVED
    return system.condition in POTENTIAL


FactKey = tuple[str, tuple[str, object]]


def _norm(value: object) -> tuple[str, object]:
    """Values that ``=`` treats as equal get equal keys (numbers compare as numbers)."""
    if not isinstance(value, bool):
        try:
            return ("n", float(value))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            pass
    return ("s", str(value).lower() if isinstance(value, bool) else str(value))


def _equalities(requirement: Requirement) -> list[FactKey]:
    """``prop = value`` terms every matching system must satisfy (top level only)."""
    terms = requirement.terms if isinstance(requirement, AllOf) else (requirement,)
    return [(t.prop, _norm(t.value)) for t in terms if isinstance(t, Compare) and exact(t)]


def _fact_keys(system: SystemEntry) -> list[FactKey]:
    out = []
    for prop, value in system.facts.items():
        # sets and collections are never looked up; an empty value is no value
        if not isinstance(value, frozenset | tuple) and value != "":
            out.append((prop, _norm(value)))
    return out


@dataclass
class ClassIndex:
    """Viability classes and which systems meet each.

    Matching a new class against every system (or a new system against every
    class) would be quadratic at lab scale, so systems are indexed by their
    facts and classes by one of their ``prop = value`` terms: only systems (or
    classes) that agree on it are evaluated.

    A class with a distro requirement is met where the static part is and the
    system's lab carries a tree for it (``catalogue``): its systems meeting the
    static part are kept (``_static``), so a lab's new trees re-fit only those
    (:meth:`refit`), never re-evaluating a requirement.
    """

    classes: dict[str, ViabilityClass] = field(default_factory=dict)
    systems_of: dict[str, set[str]] = field(default_factory=dict)
    classes_of: dict[str, set[str]] = field(default_factory=dict)
    _all: dict[str, SystemEntry] = field(default_factory=dict)
    _by_fact: dict[FactKey, set[str]] = field(default_factory=dict)
    _by_term: dict[FactKey, set[str]] = field(default_factory=dict)
    _general: set[str] = field(default_factory=set)  # classes with no equality term
    _key_of: dict[ViabilityClass, str] = field(default_factory=dict)  # its text, worked out once
    # per system, the classes it meets as one shared frozenset: systems alike share one
    kinds_of: dict[str, frozenset[str]] = field(default_factory=dict)
    members: dict[frozenset[str], set[str]] = field(default_factory=dict)  # kind -> its systems
    _kinds: dict[frozenset[str], frozenset[str]] = field(default_factory=dict)
    catalogue: Catalogue = field(default_factory=Catalogue)
    _static: dict[str, set[str]] = field(default_factory=dict)  # distro class -> static met

    def add_class(self, klass: ViabilityClass) -> str:
        """Register a class (once) and find the systems that meet it."""
        key = self._key_of.get(klass)
        if key is None:
            key = self._key_of[klass] = klass.key
        if key in self.classes:
            return key
        self.classes[key] = klass
        terms = _equalities(klass.requirement)
        if terms:
            self._by_term.setdefault(terms[0], set()).add(key)
            pools = [self._by_fact.get(t, set()) for t in terms]
            candidates: set[str] | dict[str, SystemEntry] = set.intersection(*pools)
        else:
            self._general.add(key)
            candidates = self._all
        met = {fqdn for fqdn in candidates if meets(self._all[fqdn], klass)}
        if klass.distro is not None:
            self._static[key] = met
            met = {f for f in met if self.catalogue.serves(self._all[f], klass.distro)}
        self.systems_of[key] = met
        for fqdn in met:
            self.classes_of.setdefault(fqdn, set()).add(key)
            self._kind(fqdn)
        return key

    def add_system(self, system: SystemEntry) -> None:
        """Register a system against every known class that could match it."""
        self._all[system.fqdn] = system
        facts = _fact_keys(system)
        for fact in facts:
            self._by_fact.setdefault(fact, set()).add(system.fqdn)
        candidates = set(self._general)
        for fact in facts:
            candidates |= self._by_term.get(fact, set())
        met = {key for key in candidates if meets(system, self.classes[key])}
        for key in met & self._static.keys():
            self._static[key].add(system.fqdn)
            if not self.catalogue.serves(system, self.classes[key].distro):
                met.discard(key)
        self.classes_of[system.fqdn] = met
        for key in met:
            self.systems_of[key].add(system.fqdn)
        self._kind(system.fqdn)

    def refit(self, lab: str | None) -> set[str]:
        """After the trees of ``lab`` (None: of every lab) changed: the distro classes each of
        its systems meets again; returns the systems whose classes changed."""
        changed: set[str] = set()
        for key, static in self._static.items():
            distro = self.classes[key].distro
            met = self.systems_of[key]
            for fqdn in static:
                system = self._all[fqdn]
                if lab is not None and system.lab != lab:
                    continue
                if self.catalogue.serves(system, distro) == (fqdn in met):
                    continue
                changed.add(fqdn)
                if fqdn in met:
                    met.discard(fqdn)
                    self.classes_of[fqdn].discard(key)
                else:
                    met.add(fqdn)
                    self.classes_of[fqdn].add(key)
        for fqdn in changed:
            self._kind(fqdn)
        return changed

    def _kind(self, fqdn: str) -> None:
        was = self.kinds_of.get(fqdn)
        if was is not None:
            alike = self.members[was]
            alike.discard(fqdn)
            if not alike:
                del self.members[was]
        met = frozenset(self.classes_of[fqdn])
        kind = self._kinds.setdefault(met, met)
        self.kinds_of[fqdn] = kind
        self.members.setdefault(kind, set()).add(fqdn)


Cell = tuple[int, float]  # (smallest width, smallest plan) of the sets it holds
ANY: Cell = (0, 0.0)  # the one cell of a queue that is not shaped


def width_floor(width: int) -> int:
    """The cell of a width: exact up to 16, above that four cells per doubling."""
    if width <= 16:
        return width
    drop = width.bit_length() - 3
    return (width >> drop) << drop


def time_floor(max_time: float | None) -> float:
    """The cell of a declared maximum time: four per doubling; none is its own (infinite)."""
    if max_time is None:
        return math.inf
    seconds = int(max_time)
    if seconds <= 16:
        return float(seconds)
    drop = seconds.bit_length() - 3
    return float((seconds >> drop) << drop)


def cell_of(entry: SetEntry) -> Cell:
    """Where a waiting set sits in a shaped queue: by what it still needs and how long it runs."""
    return (width_floor(entry.missing), time_floor(entry.busy_for))


@dataclass(frozen=True)
class Window:
    """What a backfill candidate must fit: at most ``width`` systems, and either a declared
    time of at most ``time`` seconds (rule 1) or at most ``extra`` systems (rule 2)."""

    width: int
    time: float
    extra: int

    def admits_cell(self, cell: Cell) -> bool:
        """Whether some set of the cell could fit (the cell holds its floors and more)."""
        return cell[0] <= self.width and (cell[1] <= self.time or cell[0] <= self.extra)

    def admits(self, entry: SetEntry) -> bool:
        """Whether the set fits the window."""
        width = entry.missing
        if width > self.width:
            return False
        timed = entry.busy_for is not None and entry.busy_for <= self.time
        return timed or width <= self.extra

    def within(self, other: Window) -> bool:
        """Whether every set this window admits, ``other`` admits too."""
        return self.width <= other.width and self.time <= other.time and self.extra <= other.extra


Lanes = dict[str, dict[tuple[int, int], list[HeapItem]]]  # group -> (priority, spv) -> heap


class Queue:
    """Waiting sets, bucketed for the pending-system event.

    A *shaped* queue splits each class further into cells by the set's width
    and declared time, so that a backfill search looks only at sets that could
    fit (:class:`Window`) instead of walking the queue.
    """

    def __init__(self, fresh: Freshness, *, shaped: bool = False) -> None:
        self.shaped = shaped
        self._places = fresh.places  # each set's place in the queue: items of another are stale
        self._buckets: dict[str, dict[Cell, Lanes]] = {}
        self._live: set[tuple[int, str, int, Cell]] = set()  # (set, class, version, cell)
        self._walking = False

    def members(self) -> set[int]:
        """The sets with an item in the queue (some may have started since: check)."""
        return {live[0] for live in self._live}

    def push(self, entry: SetEntry, klass: str) -> bool:
        """Put a waiting set in the heap for one of its classes (once; never an ineligible one);
        whether it was put.

        Heaps are per (class, group, nominal priority, spv): within one, first come
        is first served also by weight, since an older set of equal spv never
        weighs more. The merge compares the heads' full order keys.
        """
        if not entry.eligible:
            return False
        cell = cell_of(entry) if self.shaped else ANY
        version = self._places.get(entry.id, 0)
        live = (entry.id, klass, version, cell)
        if live in self._live:
            return False
        self._live.add(live)
        group = entry.group or EVERYBODY
        heap = (
            self._buckets.setdefault(klass, {})
            .setdefault(cell, {})
            .setdefault(group, {})
            .setdefault((int(entry.priority), spv_key(entry.spv)), [])
        )
        heapq.heappush(heap, (entry.submitted, entry.id, version))
        return True

    def candidates(
        self,
        system: SystemEntry,
        classes: set[str],
        sets: Mapping[int, SetEntry],
        policy: AccessPolicy,
        now: float,
        config: SchedulerConfig,
        window: Window | None = None,
    ) -> Generator[tuple[SetEntry, str], None, None]:
        """Waiting sets that may use ``system``, best first by the system's order key.

        With a ``window`` (shaped queues), only sets that fit it. The caller
        checks the dynamic conditions (lab, holds); the heaps are left as they
        were, but for entries found stale.
        """
        if self._walking:
            # the walk pops entries and pushes them back when it ends; a second walk meanwhile
            # would prune heaps that look empty, and the first would push into dropped heaps
            raise RuntimeError("a queue is walked while a walk of it is under way")
        self._walking = True
        try:
            yield from self._walk(system, classes, sets, policy, now, config, window)
        finally:
            self._walking = False

    def _walk(
        self,
        system: SystemEntry,
        classes: set[str],
        sets: Mapping[int, SetEntry],
        policy: AccessPolicy,
        now: float,
        config: SchedulerConfig,
        window: Window | None,
    ) -> Generator[tuple[SetEntry, str], None, None]:
        merge: list[Merge] = []
        emptied: list[Where] = []
        # the merge breaks ties on (class, cell, group, level): any walk order gives one result
        for klass in classes:
            for cell, lanes in self._buckets.get(klass, {}).items():
                if window is not None and not window.admits_cell(cell):
                    continue
                for group, levels in lanes.items():
                    cap = policy.maximum(system.pools, group)
                    if cap is None:
                        continue
                    for level, heap in levels.items():
                        where = (klass, cell, group, level)
                        if not self._push_top(merge, heap, where, cap, sets, now, config):
                            emptied.append(where)
        for where in emptied:
            self._prune(where)
        taken: list[tuple[list[HeapItem], HeapItem]] = []
        yielded: set[tuple[int, str]] = set()  # a set may sit in a heap twice after a release
        try:
            while merge:
                _, where, heap = heapq.heappop(merge)
                item = heapq.heappop(heap)
                taken.append((heap, item))
                entry = sets[item[1]]
                if (item[1], where[0]) not in yielded and (window is None or window.admits(entry)):
                    yielded.add((item[1], where[0]))
                    yield entry, where[0]
                cap = policy.maximum(system.pools, where[2]) or Priority.LOW
                self._push_top(merge, heap, where, cap, sets, now, config)
        finally:
            for heap, item in taken:
                heapq.heappush(heap, item)

    def _push_top(
        self,
        merge: list[Merge],
        heap: list[HeapItem],
        where: Where,
        cap: Priority,
        sets: Mapping[int, SetEntry],
        now: float,
        config: SchedulerConfig,
    ) -> bool:
        """Put the heap's best live entry into the merge; False when the heap is empty."""
        klass, cell = where[0], where[1]
        while heap:
            _submitted, set_id, version = heap[0]
            entry = sets.get(set_id)
            if entry is None or not self._still_wants(entry, version, klass, cell):
                heapq.heappop(heap)  # stale: gone, re-keyed, or placed in this class
                self._live.discard((set_id, klass, version, cell))
                continue
            key: OrderKey = order_key(entry, cap, now, config)
            negated: tuple[float, ...] = tuple(
                -k for k in key
            )  # heapq is a min-heap; best key first
            # ties between heaps break on (class, cell, group, level): the same every run
            heapq.heappush(merge, (negated, where, heap))
            return True
        return False

    def _prune(self, where: Where) -> None:
        """Drop an empty heap, and the levels above it that it leaves empty."""
        klass, cell, group, level = where
        cells = self._buckets[klass]
        lanes = cells[cell]
        levels = lanes[group]
        if levels.get(level):
            return  # refilled since
        levels.pop(level, None)
        if not levels:
            del lanes[group]
            if not lanes:
                del cells[cell]

    def _still_wants(self, entry: SetEntry, version: int, klass: str, cell: Cell) -> bool:
        if not (entry.waiting and self._places.get(entry.id, 0) == version and entry.eligible):
            return False
        if not entry.wants(klass):
            return False
        return not self.shaped or cell_of(entry) == cell


def spv_key(spv: float) -> int:
    """The heap partition of an spv (the table's cells are tenths: a few hundred values at most)."""
    return round(spv * 100)
