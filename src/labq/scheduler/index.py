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
from collections.abc import Generator
from dataclasses import dataclass, field

from labq.domain.model import EVERYBODY, AccessPolicy
from labq.domain.priority import Priority
from labq.domain.requirements import SET_PROPERTIES, AllOf, Compare, Requirement, matches
from labq.domain.states import Condition
from labq.scheduler.entries import SchedulerConfig, SetEntry, SystemEntry, ViabilityClass
from labq.scheduler.order import OrderKey, order_key

HeapItem = tuple[float, int, int]  # (submitted, set id, version)
Where = tuple[str, str, tuple[int, int]]  # (class, group, (priority, spv key))
Merge = tuple[tuple[float, ...], Where, list[HeapItem]]


def meets(system: SystemEntry, klass: ViabilityClass) -> bool:
    """The static part of viability: requirement, excludes and force."""
    if system.fqdn in klass.excluded:
        return False
    if klass.force is not None and klass.force != system.fqdn:
        return False
    return matches(klass.requirement, system.facts)


def condition_allows(system: SystemEntry, klass: ViabilityClass) -> bool:
    """Automated systems serve everyone; forced recipes accept any but removed ones."""
    if klass.force is not None:
        return system.condition is not Condition.REMOVED
    return system.condition is Condition.AUTOMATED


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
    return [
        (t.prop, _norm(t.value))
        for t in terms
        if isinstance(t, Compare) and t.op == "=" and t.prop not in SET_PROPERTIES
    ]


def _fact_keys(system: SystemEntry) -> list[FactKey]:
    out = []
    for prop, value in system.facts.items():
        if not isinstance(value, frozenset):
            out.append((prop, _norm(value)))
    return out


@dataclass
class ClassIndex:
    """Viability classes and which systems meet each.

    Matching a new class against every system (or a new system against every
    class) would be quadratic at lab scale, so systems are indexed by their
    facts and classes by one of their ``prop = value`` terms: only systems (or
    classes) that agree on it are evaluated.
    """

    classes: dict[str, ViabilityClass] = field(default_factory=dict)
    systems_of: dict[str, set[str]] = field(default_factory=dict)
    classes_of: dict[str, set[str]] = field(default_factory=dict)
    _all: dict[str, SystemEntry] = field(default_factory=dict)
    _by_fact: dict[FactKey, set[str]] = field(default_factory=dict)
    _by_term: dict[FactKey, set[str]] = field(default_factory=dict)
    _general: set[str] = field(default_factory=set)  # classes with no equality term

    def add_class(self, klass: ViabilityClass) -> str:
        """Register a class (once) and find the systems that meet it."""
        key = klass.key
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
        self.systems_of[key] = met
        for fqdn in met:
            self.classes_of.setdefault(fqdn, set()).add(key)
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
        self.classes_of[system.fqdn] = met
        for key in met:
            self.systems_of[key].add(system.fqdn)


class Queue:
    """Waiting sets, bucketed for the pending-system event."""

    def __init__(self) -> None:
        self._buckets: dict[str, dict[str, dict[tuple[int, int], list[HeapItem]]]] = {}
        self._live: set[tuple[int, str, int]] = set()  # (set, class, version) in a heap

    def push(self, entry: SetEntry, klass: str) -> None:
        """Put a waiting set in the heap for one of its classes (once; never an ineligible one).

        Heaps are per (class, group, nominal priority, spv): within one, first come
        is first served also by weight, since an older set of equal spv never
        weighs more. The merge compares the heads' full order keys.
        """
        if not entry.eligible:
            return
        live = (entry.id, klass, entry.version)
        if live in self._live:
            return
        self._live.add(live)
        group = entry.group or EVERYBODY
        heap = (
            self._buckets.setdefault(klass, {})
            .setdefault(group, {})
            .setdefault((int(entry.priority), spv_key(entry.spv)), [])
        )
        heapq.heappush(heap, (entry.submitted, entry.id, entry.version))

    def candidates(
        self,
        system: SystemEntry,
        classes: set[str],
        sets: dict[int, SetEntry],
        policy: AccessPolicy,
        now: float,
        config: SchedulerConfig,
    ) -> Generator[tuple[SetEntry, str], None, None]:
        """Waiting sets that may use ``system``, best first by the system's order key.

        The caller checks the dynamic conditions (lab, holds); the heaps are left
        as they were, but for entries found stale.
        """
        merge: list[Merge] = []
        for klass in sorted(classes):
            for group, levels in sorted(self._buckets.get(klass, {}).items()):
                cap = policy.maximum(system.pools, group)
                if cap is None:
                    continue
                for level, heap in sorted(levels.items()):
                    self._push_top(merge, heap, (klass, group, level), cap, sets, now, config)
        taken: list[tuple[list[HeapItem], HeapItem]] = []
        yielded: set[tuple[int, str]] = set()  # a set may sit in a heap twice after a release
        try:
            while merge:
                _, where, heap = heapq.heappop(merge)
                item = heapq.heappop(heap)
                taken.append((heap, item))
                if (item[1], where[0]) not in yielded:
                    yielded.add((item[1], where[0]))
                    yield sets[item[1]], where[0]
                cap = policy.maximum(system.pools, where[1]) or Priority.LOW
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
        sets: dict[int, SetEntry],
        now: float,
        config: SchedulerConfig,
    ) -> None:
        while heap:
            _submitted, set_id, version = heap[0]
            entry = sets.get(set_id)
            if entry is None or not _still_wants(entry, version, where[0]):
                heapq.heappop(heap)  # stale: gone, re-keyed, or placed in this class
                self._live.discard((set_id, where[0], version))
                continue
            key: OrderKey = order_key(entry, cap, now, config)
            negated: tuple[float, ...] = tuple(
                -k for k in key
            )  # heapq is a min-heap; best key first
            # ties between heaps break on (class, group, level): the same every run
            heapq.heappush(merge, (negated, where, heap))
            return


def spv_key(spv: float) -> int:
    """The heap partition of an spv (the table's cells are tenths: a few hundred values at most)."""
    return round(spv * 100)


def _still_wants(entry: SetEntry, version: int, klass: str) -> bool:
    return entry.waiting and entry.version == version and entry.eligible and entry.wants(klass)
