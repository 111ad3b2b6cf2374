"""The queue as people see it: waiting sets in rank order, and why they are there."""

from __future__ import annotations

from datetime import datetime

from labq.domain.model import EVERYBODY
from labq.domain.priority import Priority
from labq.domain.queue import QueueRow
from labq.domain.states import RecipeState
from labq.scheduler.entries import SetEntry
from labq.scheduler.order import age_of, aged_priority, predictive_weight
from labq.scheduler.turn import turn_reason
from labq.scheduler.view import SchedulerView
from labq.service.shortage import Shortages, shortage
from labq.store import epoch

Caps = dict[tuple[str, str], Priority | None]
_STEPS = list(RecipeState)  # a set is as far as its least advanced recipe


def rows(core: SchedulerView, now: datetime) -> list[QueueRow]:
    """Every waiting set in queue order: nominal priority, predictive weight, first come.

    Effective priority depends on the system offered (its pools), so it is shown
    for each row but does not order the list.
    """
    at = epoch(now)
    weighed = [
        (entry, predictive_weight(entry, at, core.config))
        for entry in core.sets.values()
        if entry.waiting
    ]

    def order(item: tuple[SetEntry, float]) -> tuple[int, float, float, int]:
        entry, weight = item
        nominal, _submitted, _id = core.rank_of(entry)
        return (nominal, -weight, -entry.submitted, -entry.id)

    weighed.sort(key=order, reverse=True)
    caps: Caps = {}  # runs under the scheduler's lock: work out each (class, group) once
    short: Shortages = {}
    return [
        _row(core, entry, weight, position, at, caps, short)
        for position, (entry, weight) in enumerate(weighed, 1)
    ]


def _row(
    core: SchedulerView,
    entry: SetEntry,
    weight: float,
    position: int,
    at: float,
    caps: Caps,
    short: Shortages,
) -> QueueRow:
    nominal = aged_priority(entry, at, core.config)
    cap = _best_cap(core, entry, caps)
    effective = None if cap is None else min(nominal, cap).label
    placed = len(entry.placed())
    hold = f"holding {placed} of {len(entry.recipes)} in {entry.lab}" if placed else "none"
    waits_for = core.waits_for(entry) or shortage(core, entry, short)
    return QueueRow(
        set_id=entry.id,
        job_id=entry.job,
        position=position,
        effective=effective,
        nominal=nominal.label,
        age_s=max(0.0, at - entry.submitted),
        hold=hold,
        lab=entry.lab,
        spv=round(entry.spv, 3),
        weight=round(weight, 3),
        age_ticks=age_of(entry, at, core.config),
        waits_for=waits_for,
        reason=waits_for or turn_reason(core, entry, at),
        state=min((r.state for r in entry.recipes), key=_STEPS.index).value,
        labs=_labs(core, entry),
    )


def _labs(core: SchedulerView, entry: SetEntry) -> tuple[str, ...]:
    """The labs with a system for each of its classes (``queue --lab`` keeps those)."""
    if entry.lab is not None:
        return (entry.lab,)
    found: set[str] | None = None
    for klass in entry.demands():
        labs = {core.systems[f].lab for f in core.index.systems_of.get(klass, ())}
        found = labs if found is None else found & labs
    return tuple(sorted(found or ()))


def _best_cap(core: SchedulerView, entry: SetEntry, caps: Caps) -> Priority | None:
    """The highest cap the set's group has on any system one of its recipes could use."""
    group = entry.group or EVERYBODY
    found = [_class_cap(core, klass, group, caps) for klass in {r.klass for r in entry.recipes}]
    known = [cap for cap in found if cap is not None]
    return max(known) if known else None


def _class_cap(core: SchedulerView, klass: str, group: str, caps: Caps) -> Priority | None:
    key = (klass, group)
    if key not in caps:
        best: Priority | None = None
        for fqdn in core.index.systems_of.get(klass, ()):
            cap = core.policy.maximum(core.systems[fqdn].pools, group)
            if cap is not None and (best is None or cap > best):
                best = cap
                if best is Priority.URGENT:
                    break
        caps[key] = best
    return caps[key]
