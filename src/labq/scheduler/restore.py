"""Restoring the core's in-memory state from storage, deciding nothing (a restart).

The live service commits every decision before acting on it, so after a
restart the database says where everything is: which systems exist, which
sets wait, hold or run, and which system each recipe has. :func:`restore`
puts exactly that into a fresh :class:`Scheduler` — entries, holders, free
systems, the queue — without emitting a single decision: the database
already holds them. Afterwards the scheduler takes the same decisions the one
that stopped would have taken.

What storage does not keep is worked out from what it does: a set holding
systems but not started is a holder of its systems' lab; a started set's
recipes all keep their systems until ``finish`` (as the core itself does).

:func:`offer` is the pending-system event for free systems the database says
are still pending (a crash between a release and its decisions).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from labq.domain.locktable import Grant
from labq.domain.states import Condition, RecipeState
from labq.scheduler import decisions as d
from labq.scheduler.core import Scheduler
from labq.scheduler.entries import SetEntry, SetSubmission, SystemEntry

_CORE_STATES = frozenset({RecipeState.QUEUED, RecipeState.ASSIGNED, RecipeState.SCHEDULED})


@dataclass(frozen=True)
class RestoredRecipe:
    """A recipe as the core last left it: queued, assigned, or scheduled on ``system``."""

    id: int
    state: RecipeState
    system: str | None = None


@dataclass(frozen=True)
class RestoredSet:
    """A set the core knew, with where its recipes are.

    ``recipes`` follow ``submission.recipes`` one to one. A set whose recipes
    hold systems and that has not started is a holder; ``held_since`` is when
    it began holding (for ``holds.max_age``). A started set must hold a system
    for every recipe.
    """

    submission: SetSubmission
    recipes: tuple[RestoredRecipe, ...]
    started_at: float | None = None
    held_since: float | None = None


def restore(
    scheduler: Scheduler,
    systems: Iterable[SystemEntry],
    sets: Iterable[RestoredSet],
    *,
    held: Mapping[int, Sequence[Grant]] | None = None,
) -> None:
    """Fill a fresh scheduler with systems and sets in their current places.

    ``systems`` in the order they were added, ``sets`` in the order they were
    submitted (both orders show in tie-breaks and messages). Raises
    ValueError when the scheduler is not fresh or the state is impossible: a
    system held twice, a recipe on an unknown system, a set across two labs.
    ``held`` is what running sets hold of the lock service, by set id.
    """
    if scheduler.systems or scheduler.sets:
        raise ValueError("restore needs a fresh scheduler")
    for system in systems:
        _add_system(scheduler, system)
    for restored in sets:
        _add_set(scheduler, restored)
    for fqdn, system in scheduler.systems.items():
        if system.recipe is None and system.condition is not Condition.REMOVED:
            scheduler.free[system.lab].add(fqdn)
    _recount(scheduler, held or {})


def offer(scheduler: Scheduler, fqdns: Iterable[str], now: float) -> list[d.Decision]:
    """The pending-system event for free systems: each goes to the best candidate or idles."""
    scheduler._begin(now)
    for fqdn in fqdns:
        system = scheduler.systems[fqdn]
        if system.recipe is None and system.condition is not Condition.REMOVED:
            scheduler._make_pending(fqdn)
    return scheduler._finish()


def _add_system(s: Scheduler, system: SystemEntry) -> None:
    if system.fqdn in s.systems:
        raise ValueError(f"system {system.fqdn} is listed twice")
    system.recipe = None
    s.systems[system.fqdn] = system
    s.index.add_system(system)
    s.free.setdefault(system.lab, set())
    s.holders.setdefault(system.lab, set())
    s._epoch += 1


def _add_set(s: Scheduler, restored: RestoredSet) -> None:
    ids = [r.id for r in restored.submission.recipes]
    if [r.id for r in restored.recipes] != ids:
        raise ValueError(f"recipe set {restored.submission.id}: recipes do not match")
    entry = s._register(restored.submission)  # entries, classes and the queue
    for recipe, saved in zip(entry.recipes, restored.recipes, strict=True):
        if saved.state not in _CORE_STATES:
            raise ValueError(f"recipe {recipe.id}: the core never leaves one {saved.state.value}")
        if (saved.system is None) != (saved.state is not RecipeState.SCHEDULED):
            raise ValueError(f"recipe {recipe.id}: scheduled exactly when it has a system")
        recipe.state = saved.state
        if saved.system is not None:
            _place(s, entry, recipe.id, saved.system)
    entry.started_at = restored.started_at
    if entry.started and entry.unplaced():
        raise ValueError(f"recipe set {entry.id} started without a system for every recipe")
    if entry.lab is not None and not entry.started:
        s.holders[entry.lab].add(entry.id)
        entry.held_since = restored.held_since


def _recount(s: Scheduler, held: Mapping[int, Sequence[Grant]]) -> None:
    """Running slots, buckets, running locks and waiting sets' spv, as events would leave them."""
    for entry in s.sets.values():
        if entry.started and not entry.finished and entry.lab is not None:
            s._count_running(entry, entry.lab, held.get(entry.id))
    for entry in s.sets.values():
        if entry.waiting:
            throttle = s.admission.throttle_of(entry)
            if throttle != entry.throttle:
                entry.throttle = throttle
                entry.version += 1  # its heap items were pushed while it looked eligible
    s._refresh_spv()


def _place(s: Scheduler, entry: SetEntry, recipe_id: int, fqdn: str) -> None:
    system = s.systems.get(fqdn)
    if system is None:
        raise ValueError(f"recipe {recipe_id} holds unknown system {fqdn}")
    if system.recipe is not None:
        raise ValueError(f"{fqdn} is held by recipes {system.recipe} and {recipe_id}")
    if entry.lab not in (None, system.lab):
        raise ValueError(f"recipe set {entry.id} holds systems in {entry.lab} and {system.lab}")
    entry.lab = system.lab
    system.recipe = recipe_id
    s.recipes[recipe_id].system = fqdn
