"""What applying an agent's reports reads of a set: the same as the set's whole view says."""

from __future__ import annotations

import pytest

from labq.domain.states import RecipeState, Result
from labq.errors import NotFoundError
from labq.store import Repository

from .conftest import at
from .test_supervisors import scheduled_set


def test_the_report_context_agrees_with_the_set_view(seeded: Repository) -> None:
    set_id = scheduled_set(seeded, "s1.lab", "s2.lab")
    before = seeded.agents.report_context(set_id)
    assert before.started_at is None
    seeded.supervisors.start_recipe_set(set_id, lab="lab1", now=at(3), claim="c")
    view = seeded.jobs.get_recipe_set(set_id)
    context = seeded.agents.report_context(set_id)
    assert context.started_at == view.started_at == at(3)
    assert context.recipes == {r.id: r.system for r in view.recipes}
    assert set(context.recipes.values()) == {"s1.lab", "s2.lab"}
    assert context.tasks == {t.id for r in view.recipes for t in r.tasks}
    assert len(context.tasks) == 2
    other = scheduled_set(seeded, "s3.lab")
    assert seeded.agents.report_context(other).tasks.isdisjoint(context.tasks)
    with pytest.raises(NotFoundError):
        seeded.agents.report_context(set_id + 100)


def test_task_results_and_the_stop_reason_are_read_as_stored(seeded: Repository) -> None:
    set_id = scheduled_set(seeded, "s1.lab")
    seeded.supervisors.start_recipe_set(set_id, lab="lab1", now=at(3), claim="c")
    (recipe,) = seeded.jobs.get_recipe_set(set_id).recipes
    (task,) = recipe.tasks
    assert seeded.agents.task_results(recipe.id) == [None]
    for state in (RecipeState.WAITING, RecipeState.INSTALLING, RecipeState.RUNNING):
        seeded.moves.move_recipe(recipe.id, state, now=at(4))
    seeded.reports.start_task(task.id, now=at(5))
    seeded.reports.finish_task(task.id, now=at(6), result=Result.FAIL, exit_code=1)
    assert seeded.agents.task_results(recipe.id) == [Result.FAIL.value]
    assert seeded.agents.stop_reason(set_id) is None
    assert seeded.supervisors.request_stop(set_id, "cancelled by alice")
    assert seeded.agents.stop_reason(set_id) == "cancelled by alice"
    assert seeded.agents.stop_reason(set_id + 100) is None
