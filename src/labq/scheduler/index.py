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
from labq.domain.requirements import matches
from labq.domain.states import Condition
from labq.scheduler.entries import SchedulerConfig, SetEntry, SystemEntry, ViabilityClass
from labq.scheduler.order import OrderKey, order_key

HeapItem = tuple[float, int, int]  # (submitted, set id, version)


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


@dataclass
class ClassIndex:
    """Viability classes and which systems meet each."""

    classes: dict[str, ViabilityClass] = field(default_factory=dict)
    systems_of: dict[str, set[str]] = field(default_factory=dict)
    classes_of: dict[str, set[str]] = field(default_factory=dict)

    def add_class(self, klass: ViabilityClass, systems: dict[str, SystemEntry]) -> str:
        """Register a class (once) and find the systems that meet it."""
        key = klass.key
        if key not in self.classes:
            self.classes[key] = klass
            met = {fqdn for fqdn, s in systems.items() if meets(s, klass)}
            self.systems_of[key] = met
            for fqdn in met:
                self.classes_of.setdefault(fqdn, set()).add(key)
        return key

    def add_system(self, system: SystemEntry) -> None:
        """Register a system against every known class."""
        met = {key for key, klass in self.classes.items() if meets(system, klass)}
        self.classes_of[system.fqdn] = met
        for key in met:
            self.systems_of[key].add(system.fqdn)


class Queue:
    """Waiting sets, bucketed for the pending-system event."""

    def __init__(self) -> None:
        self._buckets: dict[str, dict[str, dict[int, list[HeapItem]]]] = {}

    def push(self, entry: SetEntry, klass: str) -> None:
        """Put a waiting set in the heap for one of its classes."""
        group = entry.group or EVERYBODY
        heap = (
            self._buckets.setdefault(klass, {})
            .setdefault(group, {})
            .setdefault(int(entry.priority), [])
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
        merge: list[tuple[tuple[float, ...], int, list[HeapItem], str]] = []
        for klass in classes:
            for group, levels in self._buckets.get(klass, {}).items():
                cap = policy.maximum(system.pools, group)
                if cap is None:
                    continue
                for heap in levels.values():
                    self._push_top(merge, heap, klass, cap, sets, now, config)
        taken: list[tuple[list[HeapItem], HeapItem]] = []
        try:
            while merge:
                _, _, heap, klass = heapq.heappop(merge)
                item = heapq.heappop(heap)
                taken.append((heap, item))
                yield sets[item[1]], klass
                group = sets[item[1]].group or EVERYBODY
                cap = policy.maximum(system.pools, group) or Priority.LOW
                self._push_top(merge, heap, klass, cap, sets, now, config)
        finally:
            for heap, item in taken:
                heapq.heappush(heap, item)

    def _push_top(
        self,
        merge: list[tuple[tuple[float, ...], int, list[HeapItem], str]],
        heap: list[HeapItem],
        klass: str,
        cap: Priority,
        sets: dict[int, SetEntry],
        now: float,
        config: SchedulerConfig,
    ) -> None:
        while heap:
            _submitted, set_id, version = heap[0]
            entry = sets.get(set_id)
            if entry is None or not _still_wants(entry, version, klass):
                heapq.heappop(heap)  # stale: gone, re-keyed, or placed in this class
                continue
            key: OrderKey = order_key(entry, cap, now, config)
            negated: tuple[float, ...] = tuple(
                -k for k in key
            )  # heapq is a min-heap; best key first
            heapq.heappush(merge, (negated, id(heap), heap, klass))
            return


def _still_wants(entry: SetEntry, version: int, klass: str) -> bool:
    if not entry.waiting or entry.version != version:
        return False
    return any(r.klass == klass and r.system is None for r in entry.recipes)
