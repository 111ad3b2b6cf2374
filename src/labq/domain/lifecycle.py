"""Moving recipes and systems together, with a history row for every change.

:class:`Ledger` is the in-memory keeper of the lifecycle rules: the simulator
and the tests use it directly, and the store applies the same plan functions
against the database.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from labq.domain.model import System
from labq.domain.states import (
    MIRRORED_USAGE,
    Condition,
    RecipeState,
    Usage,
    check_recipe_move,
    check_usage_move,
)
from labq.domain.usage import UsageHistory
from labq.errors import IllegalTransition

_RELEASE: Final = frozenset({RecipeState.ASSIGNED, RecipeState.QUEUED})


@dataclass
class RecipeSlot:
    """What the lifecycle needs of a recipe: its state and the system it holds."""

    id: int
    state: RecipeState = RecipeState.NEW
    system: str | None = None


def usage_after_recipe(target: RecipeState, condition: Condition) -> Usage:
    """The usage a recipe's system takes when the recipe moves to ``target``.

    Mirrored while the recipe holds it; when the recipe ends or lets go, an
    automated system becomes pending (the pending-system event decides what is
    next) and any other system idle (broken systems are always idle).
    """
    mirrored = MIRRORED_USAGE.get(target)
    if mirrored is not None:
        return mirrored
    return Usage.PENDING if condition is Condition.AUTOMATED else Usage.IDLE


def usage_after_condition(condition: Condition, usage: Usage, busy: bool) -> Usage:
    """The usage a system takes when its condition changes.

    Made automated while free: pending. Any other condition while free: idle.
    A system still holding a recipe keeps its usage until that recipe lets go.
    """
    if busy:
        return usage
    return Usage.PENDING if condition is Condition.AUTOMATED else Usage.IDLE


class Ledger:
    """Systems, recipes and the usage history, kept consistent with one another."""

    def __init__(self) -> None:
        self.systems: dict[str, System] = {}
        self.recipes: dict[int, RecipeSlot] = {}
        self.history = UsageHistory()

    def add_system(self, system: System, now: float) -> None:
        """Register a system; an automated one starts pending, any other idle."""
        if system.fqdn in self.systems:
            raise ValueError(f"system {system.fqdn} already exists")
        system.usage = Usage.IDLE
        system.recipe = None
        self.systems[system.fqdn] = system
        self._record(system, now)
        if system.condition is Condition.AUTOMATED:
            self.set_usage(system.fqdn, Usage.PENDING, now)

    def add_recipe(self, recipe_id: int) -> RecipeSlot:
        """Register a new recipe."""
        slot = RecipeSlot(recipe_id)
        self.recipes[recipe_id] = slot
        return slot

    def set_condition(self, fqdn: str, condition: Condition, now: float) -> None:
        """Change a system's condition; its usage follows (see usage_after_condition)."""
        system = self.systems[fqdn]
        if system.condition is condition:
            return
        system.condition = condition
        target = usage_after_condition(condition, system.usage, system.recipe is not None)
        if target is not system.usage:
            check_usage_move(system.usage, target)
            system.usage = target
        self._record(system, now)

    def set_usage(self, fqdn: str, usage: Usage, now: float) -> None:
        """Move a free system's usage (pending → idle, say); held ones move with their recipe."""
        system = self.systems[fqdn]
        if usage is system.usage:
            return
        if system.recipe is not None or usage not in (Usage.IDLE, Usage.PENDING):
            raise IllegalTransition(
                f"{fqdn}: only a free system moves between idle and pending by itself"
            )
        if check_usage_move(system.usage, usage):
            system.usage = usage
            self._record(system, now)

    def move_recipe(
        self, recipe_id: int, target: RecipeState, now: float, *, system: str | None = None
    ) -> None:
        """Move a recipe; its system's usage moves with it and the history grows."""
        recipe = self.recipes[recipe_id]
        if not check_recipe_move(recipe.state, target):
            return
        if target is RecipeState.SCHEDULED:
            self._take(recipe, system, now)
        elif recipe.system is not None:
            held = self.systems[recipe.system]
            new_usage = usage_after_recipe(target, held.condition)
            check_usage_move(held.usage, new_usage)
            if target.is_final or target in _RELEASE:
                held.recipe = None
                recipe.system = None
            held.usage = new_usage
            self._record(held, now)
        recipe.state = target

    def _take(self, recipe: RecipeSlot, fqdn: str | None, now: float) -> None:
        if fqdn is None:
            raise IllegalTransition(f"recipe {recipe.id} cannot be scheduled without a system")
        held = self.systems[fqdn]
        if held.recipe is not None:
            raise IllegalTransition(f"{fqdn} already serves recipe {held.recipe}")
        check_usage_move(held.usage, Usage.SCHEDULED)
        held.recipe = recipe.id
        held.usage = Usage.SCHEDULED
        recipe.system = fqdn
        self._record(held, now)

    def _record(self, system: System, now: float) -> None:
        self.history.record(system.fqdn, system.usage, system.condition, system.recipe, now)
