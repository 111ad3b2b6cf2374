"""What a waiting set that nothing blocks waits for, in plain words.

A set no dependency, filter, lock, pause or shortage keeps back still waits for
systems: this says which (its requirement, as people write it), how many match,
and what the busy ones do — running until about their declared end (start plus
``max_time``), or held by a set ranked before it. Pure: the core's state and
``now`` in, text out (times in UTC).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

from labq.domain.requirements import AnyOf, Compare, Negation, Requirement, Some
from labq.scheduler.entries import SetEntry, ViabilityClass
from labq.scheduler.index import condition_allows
from labq.scheduler.view import SchedulerView

_SYMBOLS: Final = frozenset({"=", "!=", "<", "<=", ">", ">="})
HELD_SHOWN: Final = 3  # holders named; more are counted


def turn_reason(core: SchedulerView, entry: SetEntry, now: float) -> str:
    """``waits for 3 systems matching arch=aarch64: 2 busy until ~14:05 UTC, …``.

    Only the recipes still without a system count (a holder waits for the rest).
    """
    parts = []
    wanted: dict[str, int] = {}
    for recipe in entry.unplaced() or entry.recipes:
        wanted[recipe.klass] = wanted.get(recipe.klass, 0) + 1
    for klass, count in sorted(wanted.items()):
        parts.append(_class_reason(core, entry, klass, count, now))
    return "; ".join(parts)


def _class_reason(core: SchedulerView, entry: SetEntry, klass: str, count: int, now: float) -> str:
    index, systems = core.index, core.systems
    viability = index.classes[klass]
    usable = sorted(
        fqdn
        for fqdn in index.systems_of.get(klass, ())
        if (entry.lab is None or systems[fqdn].lab == entry.lab)
        and core.policy.maximum(systems[fqdn].pools, entry.group) is not None
        and condition_allows(systems[fqdn], viability)
        and fqdn not in entry.held  # what it holds already is counted in its hold
    )
    matching = describe_class(viability)
    head = f"waits for {_count(count, 'system')}" + (f" matching {matching}" if matching else "")
    if not usable:
        return f"{head}: none is usable now"
    free = 0
    ends: list[float | None] = []  # None: it could end any moment (no max_time)
    held_by: list[int] = []
    for fqdn in usable:
        recipe = systems[fqdn].recipe
        if recipe is None:
            free += 1
        elif (end := core.busy_until(fqdn, now)) is not None:
            ends.append(end if end > now else None)
        else:
            held_by.append(core.recipes[recipe].set_id)
    said = [f"{free} free"] if free else []
    if ends:
        said.append(_busy(ends, max(0, count - free)))
    if held_by:
        said.append(_held(held_by))
    total = "" if len(usable) == count else f" ({len(usable)} in all)"
    return f"{head}{total}: {', '.join(said) or 'all free, its place in the queue next'}"


def _busy(ends: list[float | None], needed: int) -> str:
    """``2 busy until ~14:05 UTC``: when enough of them are declared free for this set."""
    known = sorted(e for e in ends if e is not None)
    text = f"{len(ends)} busy"
    if needed and len(known) >= needed and len(known) == len(ends):
        return f"{text} until ~{_clock(known[needed - 1])}"
    if known:
        return f"{text}, the first until ~{_clock(known[0])}"
    return f"{text} (no end declared)"


def _held(sets: list[int]) -> str:
    unique = sorted(set(sets))
    names = ", ".join(str(s) for s in unique[:HELD_SHOWN])
    more = len(unique) - HELD_SHOWN
    tail = f" and {more} more" if more > 0 else ""
    return f"{len(sets)} held by set{'s' if len(unique) > 1 else ''} {names}{tail}"


def _clock(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%H:%M UTC")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def describe_class(klass: ViabilityClass) -> str:
    """A class as people write it: ``arch=aarch64 and memory>=4096``, ``system s1``
    (empty: any system will do)."""
    if klass.force is not None:
        return f"system {klass.force}"
    text = describe(klass.requirement)
    if klass.excluded:
        text = f"{text or 'any system'} except {', '.join(sorted(klass.excluded))}"
    return text


def describe(req: Requirement) -> str:
    """A requirement in one line: ``arch=aarch64 and not (hypervisor=kvm)``."""
    if isinstance(req, Compare):
        sep = "" if req.op in _SYMBOLS else " "
        return f"{req.prop}{sep}{req.op}{sep}{req.value}"
    if isinstance(req, Negation):
        return f"not ({describe(req.term)})"
    if isinstance(req, Some):
        return f"a {req.collection} with {describe(req.term)}"
    if isinstance(req, AnyOf):
        return "(" + " or ".join(describe(t) for t in req.terms) + ")" if req.terms else "nothing"
    return " and ".join(describe(t) for t in req.terms)
