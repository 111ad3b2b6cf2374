"""How many systems of each lab and pool are in each state, as Slurm's ``sinfo`` counts them.

Each system counts once per row it belongs to, in exactly one column:

- ``running``: a started recipe has it (waiting, installing, running);
- ``held``: a recipe that has not started holds it (scheduled);
- ``reserved``: not serving a recipe, and reserved or loaned to a person;
- otherwise, free: ``broken`` or ``manual`` by its condition, else ``idle`` (automated,
  idle or pending: offered to the queue).

Removed systems are left out: they stay only in the history.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from labq.domain.model import System
from labq.domain.states import Condition, Usage

COLUMNS: Final = ("idle", "held", "running", "broken", "manual", "reserved")
_RUNNING: Final = frozenset({Usage.WAITING, Usage.INSTALLING, Usage.RUNNING})


def column_of(system: System, reserved: frozenset[str] = frozenset()) -> str:
    """The one column a (not removed) system counts in; ``reserved`` names the systems
    reserved or loaned to a person."""
    if system.usage in _RUNNING:
        return "running"
    if system.usage is Usage.SCHEDULED:
        return "held"
    if system.fqdn in reserved:
        return "reserved"
    if system.condition is Condition.BROKEN:
        return "broken"
    if system.condition is Condition.MANUAL:
        return "manual"
    return "idle"


def _row(systems: list[System], reserved: frozenset[str]) -> dict[str, int]:
    counts = dict.fromkeys(COLUMNS, 0)
    for system in systems:
        counts[column_of(system, reserved)] += 1
    return {"total": len(systems), **counts}


def summarise(
    systems: Iterable[System], reserved: frozenset[str] = frozenset()
) -> list[dict[str, object]]:
    """One entry per lab (sorted): its counts, and its pools' (a system in no pool counts
    under ``pool: null``; one in two pools under both)."""
    by_lab: dict[str, list[System]] = {}
    for system in systems:
        if system.condition is not Condition.REMOVED:
            by_lab.setdefault(system.lab, []).append(system)
    out: list[dict[str, object]] = []
    for lab in sorted(by_lab):
        members = by_lab[lab]
        names = sorted({p for s in members for p in s.pools})
        pools: list[dict[str, object]] = [
            {"pool": name, **_row([s for s in members if name in s.pools], reserved)}
            for name in names
        ]
        loose = [s for s in members if not s.pools]
        if loose:
            pools.append({"pool": None, **_row(loose, reserved)})
        out.append({"lab": lab, **_row(members, reserved), "pools": pools})
    return out
