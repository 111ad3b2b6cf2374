"""Jobs and results as the API shows them (JSON); the log listing is
:func:`labq.usecases.logs.log_files`."""

from __future__ import annotations

from typing import Any

from labq.store import JobView, RecipeSetView, RecipeView, TaskView


def job_summary(job: JobView) -> dict[str, Any]:
    """One line of a job listing."""
    return {
        "id": job.id,
        "owner": job.owner,
        "group": job.group,
        "whiteboard": job.spec.whiteboard,
        "submitted_at": job.submitted_at,
        "source_format": job.source_format,
        "state": job.state.value,
        "result": None if job.result is None else job.result.value,
    }


def job_json(job: JobView) -> dict[str, Any]:
    """A whole job: sets (every attempt), recipes and tasks."""
    ref = None if job.spec.ref is None else job.spec.ref.model_dump(mode="json")
    return {
        **job_summary(job),
        "ref": ref,
        "depends": [d.to_native() for d in job.spec.depends],
        "metadata": job.spec.metadata,
        "cloned_from": job.cloned_from,
        "current_sets": [s.id for s in job.current_sets],
        "sets": [_set_json(s) for s in job.sets],
    }


def _set_json(rset: RecipeSetView) -> dict[str, Any]:
    return {
        "id": rset.id,
        "position": rset.position,
        "attempt": rset.attempt,
        "retry_of": rset.retry_of,
        "max_retries": rset.spec.max_retries,
        "priority": rset.spec.priority.label,
        "max_time": rset.spec.max_time,
        "extended": rset.extended,
        "locks": rset.spec.model_dump(mode="json")["locks"],
        "state": rset.state.value,
        "result": None if rset.result is None else rset.result.value,
        "error": rset.error,
        "lab": rset.lab,
        "submitted_at": rset.submitted_at,
        "started_at": rset.started_at,
        "finished_at": rset.finished_at,
        "stop_reason": rset.stop_reason,
        "recipes": [_recipe_json(r, rset.spec.recipes[i].role) for i, r in enumerate(rset.recipes)],
    }


def _recipe_json(recipe: RecipeView, role: str | None) -> dict[str, Any]:
    return {
        "id": recipe.id,
        "role": role,
        "state": recipe.state.value,
        "system": recipe.system,
        "result": None if recipe.result is None else recipe.result.value,
        "queued_at": recipe.queued_at,
        "scheduled_at": recipe.scheduled_at,
        "started_at": recipe.started_at,
        "finished_at": recipe.finished_at,
        "tasks": [_task_json(t) for t in recipe.tasks],
    }


def _task_json(task: TaskView) -> dict[str, Any]:
    return {
        "id": task.id,
        "name": task.name,
        "status": task.status,
        "result": None if task.result is None else task.result.value,
        "exit_code": task.exit_code,
        "started_at": task.started_at,
        "finished_at": task.finished_at,
        "message": task.message,
        "guest": task.guest,
    }


def results_json(job: JobView) -> dict[str, Any]:
    """The outcome of every recipe and task, current attempts first-class."""
    return {
        "id": job.id,
        "state": job.state.value,
        "result": None if job.result is None else job.result.value,
        "sets": [
            {
                "id": s.id,
                "attempt": s.attempt,
                "current": s in job.current_sets,
                "state": s.state.value,
                "result": None if s.result is None else s.result.value,
                "error": s.error,
                "stop_reason": s.stop_reason,
                "recipes": [
                    {
                        "id": r.id,
                        "system": r.system,
                        "state": r.state.value,
                        "result": None if r.result is None else r.result.value,
                        "tasks": [_task_json(t) for t in r.tasks],
                    }
                    for r in s.recipes
                ],
            }
            for s in job.sets
        ],
    }
