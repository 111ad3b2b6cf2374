"""Moving recipes, with their systems, by guarded UPDATEs (the rules of ``Ledger``).

Each move reads the recipe, lets the domain decide (``check_recipe_move``,
``usage_after_recipe``), then writes with an ``UPDATE … WHERE state IN
(predecessors)`` that must change exactly one row: if another process moved the
recipe or took the system in between, the update matches nothing and the move
fails with :class:`ConflictError` instead of overwriting what it did.

What else a move writes, in the same SAVEPOINT: a ``recipe_history`` row; when
the recipe ends, its unfinished tasks end with it, the set's ``finished_at`` once
its last recipe ended, and the system's count of consecutive aborts.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from sqlalchemy import ColumnElement, exists, insert, select, update

from labq.domain.lifecycle import usage_after_recipe
from labq.domain.states import (
    RecipeState,
    Usage,
    check_recipe_move,
    check_usage_move,
    recipe_predecessors,
    usage_predecessors,
)
from labq.errors import ConflictError, IllegalTransition, NotFoundError
from labq.store.base import Db, SystemState
from labq.store.columns import values_of
from labq.store.tables import RecipeHistory, Recipes, RecipeSets, Systems, Tasks
from labq.store.views import HistoryEntry

# When a recipe enters one of these states, the matching timestamp is set.
STAMPS: Final = {
    RecipeState.QUEUED: "queued_at",
    RecipeState.SCHEDULED: "scheduled_at",
    RecipeState.RUNNING: "started_at",
    RecipeState.COMPLETED: "finished_at",
    RecipeState.CANCELLED: "finished_at",
    RecipeState.ABORTED: "finished_at",
}
# An abort counts against a system only once its set started there (not a held one
# given up); a completed recipe clears the count.
_STARTED: Final = frozenset({RecipeState.WAITING, RecipeState.INSTALLING, RecipeState.RUNNING})
# What a task that had not finished says when its recipe ends without it.
_ENDED_WITH_RECIPE: Final = {
    "new": "never ran: its recipe was {}",
    "running": "still running when its recipe was {}",
}


class RecipeMoves:
    """Recipe state moves; a recipe's system moves with it, and the history grows."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def recipe_state(self, recipe_id: int) -> RecipeState:
        """The stored state of one recipe."""
        return self._recipe(recipe_id)[0]

    def move_recipe(
        self,
        recipe_id: int,
        target: RecipeState,
        *,
        now: datetime,
        system: str | None = None,
        reason: str | None = None,
    ) -> bool:
        """Move a recipe (``system`` names the one to take when scheduling).

        Returns False when the recipe already is in ``target`` (a repeat is a
        no-op). Raises :class:`IllegalTransition` for a move the table forbids and
        :class:`ConflictError` when the recipe or system changed under us, or the
        system to take is not free. Nothing is written unless everything is.
        ``reason`` goes into the recipe's history row.
        """
        with self.db.atomic():
            current, held, set_id = self._recipe(recipe_id)
            if not check_recipe_move(current, target):
                return False
            seen: SystemState | None = None
            if target is RecipeState.SCHEDULED:
                seen = self._free_system(recipe_id, system)
            elif held is not None:
                seen = self.db.system_state(Systems.id == held)
            if not self._update_recipe(recipe_id, target, now, seen):
                return False
            if seen is not None:
                self._carry_system(recipe_id, seen, current, target, now)
            self._remember(recipe_id, target, now, reason)
            if target.is_final:
                self._end_tasks(recipe_id, target, now)
                self._end_set(set_id, now)
        return True

    def recipe_history(self, recipe_id: int) -> list[HistoryEntry]:
        """Every state the recipe went through, oldest first, with the reasons given."""
        self._recipe(recipe_id)
        stmt = (
            select(RecipeHistory.state, RecipeHistory.at, RecipeHistory.reason)
            .where(RecipeHistory.recipe_id == recipe_id)
            .order_by(RecipeHistory.at, RecipeHistory.id)
        )
        return [
            HistoryEntry(RecipeState(state), at, reason)
            for state, at, reason in self.conn.execute(stmt)
        ]

    def _recipe(self, recipe_id: int) -> tuple[RecipeState, int | None, int]:
        stmt = select(Recipes.state, Recipes.system_id, Recipes.recipe_set_id).where(
            Recipes.id == recipe_id
        )
        row = self.conn.execute(stmt).one_or_none()
        if row is None:
            raise NotFoundError(f"no recipe {recipe_id}")
        return RecipeState(row.state), row.system_id, row.recipe_set_id

    def _remember(
        self, recipe_id: int, state: RecipeState, now: datetime, reason: str | None
    ) -> None:
        self.conn.execute(
            insert(RecipeHistory).values(
                recipe_id=recipe_id, state=state.value, at=now, reason=reason
            )
        )

    def _end_tasks(self, recipe_id: int, target: RecipeState, now: datetime) -> None:
        """Tasks a finished recipe never finished end with it (aborted, else cancelled),
        with a message saying so; they have no result, as nobody saw how they went."""
        status = "aborted" if target is RecipeState.ABORTED else "cancelled"
        for was, message in _ENDED_WITH_RECIPE.items():
            self.conn.execute(
                update(Tasks)
                .where(Tasks.recipe_id == recipe_id, Tasks.status == was)
                .values(status=status, finished_at=now, message=message.format(target.value))
            )

    def _end_set(self, set_id: int, now: datetime) -> None:
        """The set has ended once its last recipe did: stamp it (its state stays derived)."""
        unfinished = exists().where(
            Recipes.recipe_set_id == set_id,
            Recipes.state.not_in(values_of(s for s in RecipeState if s.is_final)),
        )
        self.conn.execute(
            update(RecipeSets)
            .where(RecipeSets.id == set_id, RecipeSets.finished_at.is_(None), ~unfinished)
            .values(finished_at=now)
        )

    def _free_system(self, recipe_id: int, fqdn: str | None) -> SystemState:
        if fqdn is None:
            raise IllegalTransition(f"recipe {recipe_id} cannot be scheduled without a system")
        seen = self.db.system_by_fqdn(fqdn)
        if seen.recipe_id is not None:
            raise ConflictError(f"{fqdn} already serves recipe {seen.recipe_id}")
        check_usage_move(seen.usage, Usage.SCHEDULED)
        return seen

    def _update_recipe(
        self, recipe_id: int, target: RecipeState, now: datetime, system: SystemState | None
    ) -> bool:
        """The guarded UPDATE of the recipe; False if a racing mover already got it there."""
        changes: dict[str, Any] = {"state": target.value}
        stamp = STAMPS.get(target)
        if stamp is not None:
            changes[stamp] = now
        if target is RecipeState.SCHEDULED and system is not None:
            changes["system_id"] = system.id
        elif not target.holds_system and not target.is_final:
            changes["system_id"] = None  # let go (back to assigned or queued)
        # A finished recipe keeps system_id: where it ran (retries exclude it).
        stmt = (
            update(Recipes)
            .where(
                Recipes.id == recipe_id, Recipes.state.in_(values_of(recipe_predecessors(target)))
            )
            .values(**changes)
        )
        if self.conn.execute(stmt).rowcount == 1:
            return True
        now_state = self._recipe(recipe_id)[0]
        if now_state is target:
            return False
        raise ConflictError(
            f"recipe {recipe_id} moved to {now_state.value} under us; not moved to {target.value}"
        )

    def _carry_system(
        self,
        recipe_id: int,
        seen: SystemState,
        current: RecipeState,
        target: RecipeState,
        now: datetime,
    ) -> None:
        """Move the recipe's system as ``Ledger.move_recipe`` does: take, mirror or release."""
        usage = usage_after_recipe(target, seen.condition)
        check_usage_move(seen.usage, usage)
        holder_now: ColumnElement[bool]
        if target is RecipeState.SCHEDULED:
            holder_now = Systems.recipe_id.is_(None)
        else:
            holder_now = Systems.recipe_id == recipe_id
        guard = [Systems.usage.in_(values_of(usage_predecessors(usage))), holder_now]
        holder = recipe_id if target.holds_system else None
        health: dict[str, Any] = {}
        if current in _STARTED and target is RecipeState.ABORTED:
            health["consecutive_aborts"] = Systems.consecutive_aborts + 1
        elif target is RecipeState.COMPLETED:
            health["consecutive_aborts"] = 0
        self.db.move_system(seen, now, guard, usage=usage.value, recipe_id=holder, **health)
