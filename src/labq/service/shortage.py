"""Why a waiting set cannot run now although it could once its systems are back.

A set that no system can ever run is refused at submission or aborted by the
consistency pass; one whose systems are only broken or manual for now waits, and
the queue says so (docs/scheduling.md). Busy systems are no shortage: the set
waits for its turn.
"""

from __future__ import annotations

from collections import Counter
from typing import Final

from labq.domain.states import Condition
from labq.scheduler.entries import SetEntry
from labq.scheduler.index import condition_allows
from labq.scheduler.placement import gang_match, is_complete
from labq.scheduler.view import SchedulerView

SHOWN: Final = 8  # systems named; more are counted

Shortages = dict[tuple[tuple[tuple[str, int], ...], str | None], str | None]


def shortage(core: SchedulerView, entry: SetEntry, memo: Shortages) -> str | None:
    """``every matching system is broken: s1, s2`` and the like; None when none is short.

    ``memo`` keeps the answer per (classes, group) for one look at the queue.
    """
    demands = Counter(r.klass for r in entry.recipes)
    key = (tuple(sorted(demands.items())), entry.group)
    if key not in memo:
        memo[key] = _shortage(core, dict(demands), entry.group)
    return memo[key]


def _shortage(core: SchedulerView, demands: dict[str, int], group: str | None) -> str | None:
    usable: dict[str, list[str]] = {}
    away: dict[str, str] = {}  # systems that may come back, and why they are away
    for klass in demands:
        usable[klass] = []
        for fqdn in core.index.systems_of.get(klass, ()):
            system = core.systems[fqdn]
            if core.policy.maximum(system.pools, group) is None:
                continue
            if condition_allows(system, core.index.classes[klass]):
                usable[klass].append(fqdn)
            elif system.condition is not Condition.REMOVED:
                held = system.held_by is not None and system.condition is Condition.AUTOMATED
                away[fqdn] = f"held by {system.held_by}" if held else system.condition.value
    if not away:
        return None
    for lab in sorted(core.free):
        in_lab = {k: [f for f in fs if core.systems[f].lab == lab] for k, fs in usable.items()}
        if is_complete(demands, gang_match(demands, in_lab)):
            return None  # it fits on systems usable now, once they are free: its turn
    conditions = sorted(set(away.values()))
    if not any(usable.values()):
        if len(conditions) == 1:
            return f"every matching system is {conditions[0]}: {_names(sorted(away))}"
        shown = [f"{f} ({away[f]})" for f in sorted(away)]
        return f"every matching system is {' or '.join(conditions)}: {_names(shown)}"
    shown = [f"{f} ({away[f]})" for f in sorted(away)]
    return f"too few matching systems are usable now; the others are away: {_names(shown)}"


def _names(names: list[str]) -> str:
    more = len(names) - SHOWN
    return ", ".join(names[:SHOWN]) + (f" and {more} more" if more > 0 else "")
