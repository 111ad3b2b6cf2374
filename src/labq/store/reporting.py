"""What supervisors report: tasks starting and ending, recipe results, where logs are.

Tasks have their own small state machine (``TASK_MOVES``), enforced like the
recipes': the domain table decides, then a guarded ``UPDATE … WHERE status IN
(…)`` must change exactly one row. A task runs only while its recipe runs; the
tasks a recipe never finished end with it (``move_recipe``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from sqlalchemy import select, update

from labq.domain.states import FINAL_RECIPE_STATES, RecipeState, Result
from labq.errors import ConflictError, IllegalTransition, NotFoundError
from labq.store.base import Db
from labq.store.columns import values_of
from labq.store.tables import FINAL_TASK_STATUSES, Recipes, Tasks

TASK_MOVES: Final[Mapping[str, frozenset[str]]] = {
    "new": frozenset({"running", "cancelled", "aborted"}),
    "running": frozenset({"completed", "cancelled", "aborted"}),
    "completed": frozenset(),
    "cancelled": frozenset(),
    "aborted": frozenset(),
}


def check_task_move(current: str, target: str) -> bool:
    """True when the move changes something, False for a repeat; raises if illegal."""
    if target not in TASK_MOVES:
        raise IllegalTransition(f"there is no task status {target!r}")
    if current == target:
        return False
    if target not in TASK_MOVES[current]:
        raise IllegalTransition(f"task cannot move from {current} to {target}")
    return True


def _predecessors(target: str) -> list[str]:
    return sorted(s for s, nexts in TASK_MOVES.items() if target in nexts)


class ReportStore:
    """Task progress and results, recipe results and log locations."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def start_task(self, task_id: int, *, now: datetime) -> bool:
        """The task began running; its recipe must be running. False if it already was."""
        with self.db.atomic():
            status, recipe_state = self._task(task_id)
            if not check_task_move(status, "running"):
                return False
            if recipe_state is not RecipeState.RUNNING:
                raise IllegalTransition(
                    f"task {task_id} cannot start: its recipe is {recipe_state.value}"
                )
            running = select(Recipes.id).where(Recipes.state == RecipeState.RUNNING.value)
            return self._move_task(
                task_id, "running", [Tasks.recipe_id.in_(running)], started_at=now
            )

    def finish_task(
        self,
        task_id: int,
        *,
        now: datetime,
        status: str = "completed",
        result: Result | None = None,
        exit_code: int | None = None,
        log_path: str | None = None,
        message: str | None = None,
    ) -> bool:
        """The task ended (``completed``, ``cancelled`` or ``aborted``), with what it left.

        Its recipe must not have ended (a recipe that ends ends its tasks).
        False when the task already has that status.
        """
        if status not in FINAL_TASK_STATUSES:
            raise IllegalTransition(f"a task ends completed, cancelled or aborted, not {status!r}")
        with self.db.atomic():
            current, recipe_state = self._task(task_id)
            if not check_task_move(current, status):
                return False
            if recipe_state.is_final:
                raise IllegalTransition(
                    f"task {task_id} cannot end: its recipe already is {recipe_state.value}"
                )
            unfinished = select(Recipes.id).where(
                Recipes.state.not_in(values_of(FINAL_RECIPE_STATES))
            )
            return self._move_task(
                task_id,
                status,
                [Tasks.recipe_id.in_(unfinished)],
                finished_at=now,
                result=None if result is None else result.value,
                exit_code=exit_code,
                log_path=log_path,
                message=message,
            )

    def set_recipe_result(self, recipe_id: int, result: Result | None) -> None:
        """Record (or clear) the result of a recipe, e.g. the worst of its tasks'."""
        self._set_recipe(recipe_id, result=None if result is None else result.value)

    def set_log_dir(self, recipe_id: int, log_dir: str | None) -> None:
        """Record where a recipe's archived logs are."""
        self._set_recipe(recipe_id, log_dir=log_dir)

    def _set_recipe(self, recipe_id: int, **values: Any) -> None:
        with self.db.atomic():
            stmt = update(Recipes).where(Recipes.id == recipe_id).values(**values)
            if self.conn.execute(stmt).rowcount != 1:
                raise NotFoundError(f"no recipe {recipe_id}")

    def _task(self, task_id: int) -> tuple[str, RecipeState]:
        stmt = (
            select(Tasks.status, Recipes.state)
            .join(Recipes, Recipes.id == Tasks.recipe_id)
            .where(Tasks.id == task_id)
        )
        row = self.conn.execute(stmt).one_or_none()
        if row is None:
            raise NotFoundError(f"no task {task_id}")
        return row.status, RecipeState(row.state)

    def _move_task(self, task_id: int, target: str, guard: list[Any], **values: Any) -> bool:
        """The guarded UPDATE; False if a racing reporter already got the task there."""
        stmt = (
            update(Tasks)
            .where(Tasks.id == task_id, Tasks.status.in_(_predecessors(target)), *guard)
            .values(status=target, **values)
        )
        if self.conn.execute(stmt).rowcount == 1:
            return True
        status, recipe_state = self._task(task_id)
        if status == target:
            return False
        raise ConflictError(
            f"task {task_id} is {status} (recipe {recipe_state.value}) under us;"
            f" not moved to {target}"
        )
