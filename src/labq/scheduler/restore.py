"""Restoring the core's in-memory state from storage, deciding nothing (a restart).

The live service commits every decision before acting on it, so after a
restart the database says where everything is: which systems exist, which
sets wait, hold or run, and which system each recipe has.
:meth:`~labq.scheduler.core.Scheduler.restore` (the work of
:class:`~labq.scheduler.roster.Roster`) puts exactly that into a fresh
scheduler — entries, holders, free systems, the queue, the free-time profile —
without emitting a single decision: the database already holds them.
Afterwards the scheduler takes the same decisions the one that stopped would
have taken.

What storage does not keep is worked out from what it does: a set holding
systems but not started is a holder of its systems' lab; a started set's
recipes all keep their systems until ``finish`` (as the core itself does).

:meth:`~labq.scheduler.core.Scheduler.offer` is the pending-system event for
free systems the database says are still pending (a crash between a release
and its decisions). This module holds what is restored and the checks that
refuse an impossible state.
"""

from __future__ import annotations

from dataclasses import dataclass

from labq.domain.states import RecipeState
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


def check_recipes(restored: RestoredSet) -> tuple[RestoredRecipe, ...]:
    """The set's restored recipes, after checking they can be as the core left them."""
    ids = [r.id for r in restored.submission.recipes]
    if [r.id for r in restored.recipes] != ids:
        raise ValueError(f"recipe set {restored.submission.id}: recipes do not match")
    for saved in restored.recipes:
        if saved.state not in _CORE_STATES:
            raise ValueError(f"recipe {saved.id}: the core never leaves one {saved.state.value}")
        if (saved.system is None) != (saved.state is not RecipeState.SCHEDULED):
            raise ValueError(f"recipe {saved.id}: scheduled exactly when it has a system")
    return restored.recipes


def check_place(entry: SetEntry, recipe_id: int, fqdn: str, system: SystemEntry | None) -> None:
    """Refuse a recipe on an unknown system, a system held twice, a set across two labs."""
    if system is None:
        raise ValueError(f"recipe {recipe_id} holds unknown system {fqdn}")
    if system.recipe is not None:
        raise ValueError(f"{fqdn} is held by recipes {system.recipe} and {recipe_id}")
    if entry.lab not in (None, system.lab):
        raise ValueError(f"recipe set {entry.id} holds systems in {entry.lab} and {system.lab}")
