"""What supervisors report (tasks, results, logs), the recipe history, the abort count."""

from __future__ import annotations

import pytest

from labq.domain.states import Condition, RecipeState, Result
from labq.errors import IllegalTransition, NotFoundError
from labq.store import HistoryEntry, Repository

from .conftest import ADMIN, at, job_spec, recipe_ids

TO_RUNNING = (
    RecipeState.SCHEDULED,
    RecipeState.WAITING,
    RecipeState.INSTALLING,
    RecipeState.RUNNING,
)


def running_recipe(repo: Repository, start: int = 1, tasks: int = 2) -> int:
    """A recipe submitted at ``start`` and running on s1.lab a second later."""
    spec = job_spec()
    recipe = spec.recipe_sets[0].recipes[0]
    many = recipe.model_copy(update={"tasks": [recipe.tasks[0]] * tasks})
    spec = spec.model_copy(
        update={"recipe_sets": [spec.recipe_sets[0].model_copy(update={"recipes": [many]})]}
    )
    job_id = repo.queue.submit_job(spec, owner="bob", now=at(start), source_format="native")
    ((recipe_id,),) = recipe_ids(repo, job_id)
    for state in TO_RUNNING:
        repo.moves.move_recipe(recipe_id, state, now=at(start + 1), system="s1.lab")
    return recipe_id


def test_tasks_start_and_finish_with_what_they_left(seeded: Repository) -> None:
    recipe = running_recipe(seeded)
    first, second = (t.id for t in seeded.jobs.get_recipe(recipe).tasks)
    assert seeded.reports.start_task(first, now=at(3))
    assert not seeded.reports.start_task(first, now=at(4))  # a repeat
    assert seeded.reports.finish_task(
        first,
        now=at(5),
        result=Result.PASS,
        exit_code=0,
        log_path="logs/1/t.log",
        message="ok",
    )
    assert not seeded.reports.finish_task(first, now=at(6), result=Result.FAIL)
    with pytest.raises(IllegalTransition):
        seeded.reports.finish_task(second, now=at(6))  # completed without running
    seeded.reports.start_task(second, now=at(6))
    seeded.reports.finish_task(second, now=at(9), status="aborted", exit_code=-9, message="timeout")
    done, killed = seeded.jobs.get_recipe(recipe).tasks
    assert (done.status, done.result, done.exit_code, done.log_path, done.message) == (
        "completed",
        Result.PASS,
        0,
        "logs/1/t.log",
        "ok",
    )
    assert (done.started_at, done.finished_at) == (at(3), at(5))
    assert (killed.status, killed.exit_code, killed.message) == ("aborted", -9, "timeout")
    with pytest.raises(IllegalTransition):
        seeded.reports.finish_task(first, now=at(9), status="running")
    with pytest.raises(NotFoundError):
        seeded.reports.start_task(first + 100, now=at(9))


def test_a_task_runs_only_while_its_recipe_runs(seeded: Repository) -> None:
    job_id = seeded.queue.submit_job(job_spec(), owner="bob", now=at(1), source_format="native")
    ((recipe,),) = recipe_ids(seeded, job_id)
    (task,) = seeded.jobs.get_recipe(recipe).tasks
    with pytest.raises(IllegalTransition, match="its recipe is new"):
        seeded.reports.start_task(task.id, now=at(2))
    seeded.moves.move_recipe(recipe, RecipeState.CANCELLED, now=at(3))
    assert seeded.jobs.get_recipe(recipe).tasks[0].status == "cancelled"  # ended with it
    assert not seeded.reports.finish_task(task.id, now=at(4), status="cancelled")  # a late report
    with pytest.raises(IllegalTransition):
        seeded.reports.finish_task(task.id, now=at(4), status="aborted")


def test_unfinished_tasks_end_with_their_recipe(seeded: Repository) -> None:
    recipe = running_recipe(seeded)
    first, second = (t.id for t in seeded.jobs.get_recipe(recipe).tasks)
    seeded.reports.start_task(first, now=at(3))
    seeded.moves.move_recipe(recipe, RecipeState.ABORTED, now=at(4), reason="supervisor lost")
    tasks = seeded.jobs.get_recipe(recipe).tasks
    assert [(t.status, t.finished_at) for t in tasks] == [("aborted", at(4))] * 2
    assert second == tasks[1].id


def test_recipe_results_and_log_dirs(seeded: Repository) -> None:
    recipe = running_recipe(seeded)
    seeded.reports.set_recipe_result(recipe, Result.WARN)
    seeded.reports.set_log_dir(recipe, "/var/lib/labq/logs/1")
    view = seeded.jobs.get_recipe(recipe)
    assert (view.result, view.log_dir) == (Result.WARN, "/var/lib/labq/logs/1")
    seeded.reports.set_recipe_result(recipe, None)
    assert seeded.jobs.get_recipe(recipe).result is None
    with pytest.raises(NotFoundError):
        seeded.reports.set_log_dir(recipe + 100, "x")


def test_every_move_is_in_the_recipe_history(seeded: Repository) -> None:
    recipe = running_recipe(seeded)
    seeded.moves.move_recipe(recipe, RecipeState.RUNNING, now=at(3))  # a repeat: no row
    seeded.moves.move_recipe(recipe, RecipeState.ABORTED, now=at(4), reason="watchdog")
    assert seeded.moves.recipe_history(recipe) == [
        HistoryEntry(RecipeState.NEW, at(1), None),
        *(HistoryEntry(s, at(2), None) for s in TO_RUNNING),
        HistoryEntry(RecipeState.ABORTED, at(4), "watchdog"),
    ]
    with pytest.raises(NotFoundError):
        seeded.moves.recipe_history(recipe + 100)


def test_a_clone_and_a_cancelled_job_have_their_history(seeded: Repository) -> None:
    job_id = seeded.queue.submit_job(job_spec(1), owner="bob", now=at(1), source_format="native")
    ((recipe,),) = recipe_ids(seeded, job_id)
    seeded.queue.cancel_job(job_id, actor="bob", now=at(2), reason="not needed")
    assert [(h.state, h.reason) for h in seeded.moves.recipe_history(recipe)] == [
        (RecipeState.NEW, None),
        (RecipeState.CANCELLED, "not needed"),
    ]
    clone = seeded.retries.clone_recipe_set(
        seeded.jobs.load_job(job_id).sets[0].id, actor=ADMIN, now=at(3)
    )
    (cloned,) = seeded.jobs.get_recipe_set(clone).recipes
    assert seeded.moves.recipe_history(cloned.id) == [HistoryEntry(RecipeState.NEW, at(3), None)]


def test_aborts_in_a_row_are_counted_per_system(seeded: Repository) -> None:
    for expected in (1, 2):
        recipe = running_recipe(seeded, start=10 * expected)
        seeded.moves.move_recipe(recipe, RecipeState.ABORTED, now=at(10 * expected + 5))
        assert seeded.systems.consecutive_aborts("s1.lab") == expected
    # A held recipe given up, or cancelled, says nothing about the system.
    job_id = seeded.queue.submit_job(job_spec(), owner="bob", now=at(40), source_format="native")
    ((held,),) = recipe_ids(seeded, job_id)
    seeded.moves.move_recipe(held, RecipeState.SCHEDULED, now=at(40), system="s1.lab")
    seeded.moves.move_recipe(held, RecipeState.ABORTED, now=at(41))
    seeded.moves.move_recipe(running_recipe(seeded, 50), RecipeState.CANCELLED, now=at(55))
    assert seeded.systems.consecutive_aborts("s1.lab") == 2
    assert seeded.systems.consecutive_aborts("s2.lab") == 0
    seeded.moves.move_recipe(running_recipe(seeded, 60), RecipeState.COMPLETED, now=at(65))
    assert seeded.systems.consecutive_aborts("s1.lab") == 0
    # Fixing a system (making it automated again) starts a fresh count.
    seeded.moves.move_recipe(running_recipe(seeded, 70), RecipeState.ABORTED, now=at(75))
    seeded.systems.set_condition(
        "s1.lab", Condition.BROKEN, now=at(80), actor=ADMIN, reason="aborts"
    )
    assert seeded.systems.consecutive_aborts("s1.lab") == 1
    seeded.systems.set_condition("s1.lab", Condition.AUTOMATED, now=at(90), actor=ADMIN)
    assert seeded.systems.consecutive_aborts("s1.lab") == 0
    with pytest.raises(NotFoundError):
        seeded.systems.consecutive_aborts("nowhere")
