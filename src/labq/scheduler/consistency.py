"""The consistency pass: the slow timer that repairs what events cannot see coming.

Pure: it looks at waiting sets and says what to repair (:class:`Repair`); the
core carries the repairs out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from labq.scheduler.entries import SetEntry, SystemEntry
from labq.scheduler.index import POTENTIAL, ClassIndex, meets


@dataclass(frozen=True)
class Repair:
    """What the pass decided for one waiting set."""

    set_id: int
    action: Literal["abort", "unhold"]
    reason: str


def repairs(
    waiting: Iterable[SetEntry],
    labs: Sequence[str],
    *,
    ever: Callable[[SetEntry, str], bool],
    now_able: Callable[[SetEntry, str], bool],
    max_age: float | None,
    now: float,
) -> list[Repair]:
    """Abort sets no lab can ever run; release holds that can never complete or grew old.

    ``ever`` says whether a lab could run the whole set once its systems come
    back (manual ones included); ``now_able`` whether it could with the systems
    it may use now. A hold in a lab that cannot complete the set now waits for
    an admin, so it is given back, and the set may go to another lab.
    """
    out = []
    for entry in waiting:
        if not any(ever(entry, lab) for lab in labs):
            out.append(Repair(entry.id, "abort", ""))
        elif entry.lab is not None and not now_able(entry, entry.lab):
            reason = f"lab {entry.lab} cannot complete the set with the systems it may use now"
            out.append(Repair(entry.id, "unhold", reason))
        elif _held_too_long(entry, max_age, now):
            reason = "held systems longer than holds.max_age without starting"
            out.append(Repair(entry.id, "unhold", reason))
    return out


def unrunnable(entry: SetEntry, index: ClassIndex, systems: Mapping[str, SystemEntry]) -> str:
    """Why no lab can ever run the set, in plain words."""
    reasons = []
    for recipe in entry.recipes:
        klass = index.classes[recipe.klass]
        matching = [f for f, system in systems.items() if meets(system, klass)]
        gone = [f"{f} ({systems[f].condition.value})" for f in sorted(matching)]
        name = f"recipe {recipe.id}" + (f" (role {recipe.role})" if recipe.role else "")
        if not matching:
            reasons.append(f"{name}: no system matches its host requirements")
        elif klass.distro is not None and not index.systems_of[recipe.klass]:
            reasons.append(f"{name}: {index.catalogue.why_not(klass.distro)}")
        elif all(systems[f].condition not in POTENTIAL for f in matching):
            reasons.append(f"{name}: every matching system is removed: {', '.join(gone)}")
    if not reasons:
        reasons.append("no single lab has enough usable systems for every recipe of the set")
    return "can never run: " + "; ".join(reasons)


def _held_too_long(entry: SetEntry, limit: float | None, now: float) -> bool:
    return (
        limit is not None
        and entry.lab is not None
        and entry.held_since is not None
        and now - entry.held_since > limit
    )
