"""The consistency pass: the slow timer that repairs what events cannot see coming."""

from __future__ import annotations

from typing import TYPE_CHECKING

from labq.domain.states import Condition, RecipeState
from labq.scheduler import decisions as d
from labq.scheduler.entries import SetEntry
from labq.scheduler.index import meets
from labq.scheduler.placement import gang_match, is_complete

if TYPE_CHECKING:
    from labq.scheduler.core import Scheduler

# Conditions a system may come back from to serve again (docs/scheduling.md, "ever"):
# only removed systems are gone; a set waiting for broken or manual ones waits.
_POTENTIAL = frozenset({Condition.AUTOMATED, Condition.MANUAL, Condition.BROKEN})
# A set holds systems only for a gang that systems usable now could complete.
_NOW = frozenset({Condition.AUTOMATED})


def repair(s: Scheduler) -> None:
    """Abort waiting sets no system can ever run; release holds that went bad or old."""
    for entry in list(s.sets.values()):
        if not entry.waiting:
            continue
        labs = [lab for lab in sorted(s.free) if s.could_run_in(entry, lab)]
        if not labs and not possible_labs(s, entry, ever=True):
            _abort_unrunnable(s, entry)
        elif entry.lab is not None and entry.lab not in labs:
            s._unhold(entry, f"lab {entry.lab} can no longer run the whole set")
        elif _held_too_long(s, entry):
            s._unhold(entry, "held systems longer than holds.max_age without starting")


def possible_labs(
    s: Scheduler, entry: SetEntry, only: str | None = None, *, ever: bool = False
) -> list[str]:
    """Labs whose usable systems could run the whole set, once free (whatever they do now).

    ``ever`` counts the systems that are away for now (broken, manual) too.
    """
    conditions = _POTENTIAL if ever else _NOW
    out = []
    for lab in sorted(s.free) if only is None else [only]:
        demands: dict[str, int] = {}
        for recipe in entry.recipes:
            demands[recipe.klass] = demands.get(recipe.klass, 0) + 1
        candidates = {
            key: sorted(
                f
                for f in s.index.systems_of[key]
                if s.systems[f].lab == lab and _could_serve(s, entry, f, key, conditions)
            )
            for key in demands
        }
        if is_complete(demands, gang_match(demands, candidates)):
            out.append(lab)
    return out


def _could_serve(
    s: Scheduler, entry: SetEntry, fqdn: str, key: str, conditions: frozenset[Condition]
) -> bool:
    system = s.systems[fqdn]
    klass = s.index.classes[key]
    if klass.force is not None:
        ok = system.condition is not Condition.REMOVED
    else:
        ok = system.condition in conditions
    return ok and s.policy.maximum(system.pools, entry.group) is not None


def _held_too_long(s: Scheduler, entry: SetEntry) -> bool:
    limit = s.config.holds_max_age
    return (
        limit is not None
        and entry.lab is not None
        and entry.held_since is not None
        and s.now - entry.held_since > limit
    )


def _abort_unrunnable(s: Scheduler, entry: SetEntry) -> None:
    for recipe in entry.placed():
        s._release(recipe, "its set can never run")
    s._settle_holder(entry)
    reasons = []
    for recipe in entry.recipes:
        klass = s.index.classes[recipe.klass]
        matching = [f for f, sys in s.systems.items() if meets(sys, klass)]
        gone = [f"{f} ({s.systems[f].condition.value})" for f in sorted(matching)]
        name = f"recipe {recipe.id}" + (f" (role {recipe.role})" if recipe.role else "")
        if not matching:
            reasons.append(f"{name}: no system matches its host requirements")
        elif all(s.systems[f].condition not in _POTENTIAL for f in matching):
            reasons.append(f"{name}: every matching system is removed: {', '.join(gone)}")
    if not reasons:
        reasons.append("no single lab has enough usable systems for every recipe of the set")
    message = "can never run: " + "; ".join(reasons)
    for recipe in entry.recipes:
        recipe.state = RecipeState.ABORTED
        s._out.append(d.Abort(recipe.id, entry.id, message))
    entry.finished = True
    s._out.append(d.SetError(entry.id, message))
