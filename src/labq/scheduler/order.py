"""The queue order: aging, the global hold rank and the per-system order key."""

from __future__ import annotations

import math

from labq.domain.contention import age_ticks, weight
from labq.domain.priority import Priority
from labq.scheduler.entries import SchedulerConfig, SetEntry

# Larger sorts first in both keys below; they are compared as tuples.
Rank = tuple[int, float, int]
OrderKey = tuple[int, int, float, float, int]


def aged_priority(entry: SetEntry, now: float, config: SchedulerConfig) -> Priority:
    """The nominal priority after aging: one level per ``bump_after`` waited, to the ceiling."""
    bump = config.aging_bump_after
    if bump is None or bump <= 0 or entry.started:
        return entry.priority
    levels = math.floor(max(0.0, now - entry.submitted) / bump)
    return entry.priority.raised(levels, config.aging_ceiling)


def rank(entry: SetEntry, now: float, config: SchedulerConfig) -> Rank:
    """The global hold rank ``(nominal priority, submit time, id)``; larger wins.

    It does not depend on any system, so "a higher-ranked set may take a held
    system from a lower-ranked one" can never go round in a circle.
    """
    return (int(aged_priority(entry, now, config)), -entry.submitted, -entry.id)


def predictive_weight(entry: SetEntry, now: float, config: SchedulerConfig) -> float:
    """The set's weight now: ``spv * max(0, 1 - age_ticks / K)``; 0 with the predictive order off.

    Worked out when asked, so a passing tick needs no event: two sets of equal
    spv keep their first-come order as they age.
    """
    if not config.predictive:
        return 0.0
    return weight(entry.spv, age_of(entry, now, config), config.aging_ticks)


def age_of(entry: SetEntry, now: float, config: SchedulerConfig) -> int:
    """How long the set has waited, in whole ticks."""
    return age_ticks(now - entry.submitted, config.tick)


def order_key(entry: SetEntry, cap: Priority, now: float, config: SchedulerConfig) -> OrderKey:
    """The order for one system: ``(effective, nominal, weight, submit time, id)``, larger first.

    ``cap`` is the highest maximum effective priority the set's group has on any
    pool of that system (seed 002).
    """
    nominal = aged_priority(entry, now, config)
    effective = min(nominal, cap)
    weight_now = predictive_weight(entry, now, config)
    return (int(effective), int(nominal), -weight_now, -entry.submitted, -entry.id)
