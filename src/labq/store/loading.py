"""Reading jobs back: rows → the canonical specs and frozen views."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, TypeAlias

from sqlalchemy import ColumnElement, Connection, Row, select

from labq.domain.job import JobSpec, RecipeSetSpec
from labq.domain.states import RecipeState, Result
from labq.store.packing import TASK_COLUMNS, guest_labels, unpack
from labq.store.tables import (
    Groups,
    Jobs,
    Labs,
    RecipeExcludes,
    Recipes,
    RecipeSets,
    Systems,
    Tasks,
    Users,
)
from labq.store.views import JobView, RecipeSetView, RecipeView, TaskView

AnyRow: TypeAlias = Row[*tuple[Any, ...]]


def load_jobs(conn: Connection, job_ids: Sequence[int]) -> list[JobView]:
    """Several jobs in a handful of queries, in the order of ``job_ids``."""
    rows = {
        row.id: row
        for row in conn.execute(
            select(Jobs, Users.name.label("owner"), Groups.name.label("group"))
            .join(Users, Users.id == Jobs.owner_id)
            .outerjoin(Groups, Groups.id == Jobs.group_id)
            .where(Jobs.id.in_(job_ids))
        )
    }
    sets: dict[int, list[RecipeSetView]] = defaultdict(list)
    for view in load_sets(conn, RecipeSets.job_id.in_(list(rows))):
        sets[view.job_id].append(view)
    return [_job_view(rows[i], sets[i]) for i in job_ids if i in rows]


def load_sets(conn: Connection, where: ColumnElement[bool]) -> list[RecipeSetView]:
    """The recipe sets ``where`` picks, by job and position, with their recipes."""
    sets = conn.execute(
        select(RecipeSets, Labs.name.label("lab"))
        .outerjoin(Labs, Labs.id == RecipeSets.lab_id)
        .where(where)
        .order_by(RecipeSets.job_id, RecipeSets.position)
    ).all()
    recipes: dict[int, list[tuple[RecipeView, dict[str, Any]]]] = defaultdict(list)
    for view, native in load_recipes(conn, Recipes.recipe_set_id.in_([s.id for s in sets])):
        recipes[view.recipe_set_id].append((view, native))
    return [_set_view(row, recipes[row.id]) for row in sets]


def load_recipes(
    conn: Connection, where: ColumnElement[bool]
) -> list[tuple[RecipeView, dict[str, Any]]]:
    """Recipes as views, each with its native spec form (for rebuilding set specs)."""
    rows = conn.execute(
        select(Recipes, Systems.fqdn)
        .outerjoin(Systems, Systems.id == Recipes.system_id)
        .where(where)
        .order_by(Recipes.recipe_set_id, Recipes.position)
    ).all()
    ids = [r.id for r in rows]
    excludes: dict[int, list[str]] = defaultdict(list)
    for recipe_id, fqdn in conn.execute(
        select(RecipeExcludes.recipe_id, RecipeExcludes.fqdn)
        .where(RecipeExcludes.recipe_id.in_(ids))
        .order_by(RecipeExcludes.fqdn)
    ):
        excludes[recipe_id].append(fqdn)
    tasks: dict[int, list[AnyRow]] = defaultdict(list)
    for task in conn.execute(
        select(Tasks).where(Tasks.recipe_id.in_(ids)).order_by(Tasks.position)
    ):
        tasks[task.recipe_id].append(task)
    return [_recipe(row, excludes[row.id], tasks[row.id]) for row in rows]


def _recipe(
    row: AnyRow, excludes: list[str], tasks: list[AnyRow]
) -> tuple[RecipeView, dict[str, Any]]:
    view = RecipeView(
        id=row.id,
        recipe_set_id=row.recipe_set_id,
        position=row.position,
        state=RecipeState(row.state),
        system=row.fqdn,
        result=None if row.result is None else Result(row.result),
        queued_at=row.queued_at,
        scheduled_at=row.scheduled_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        tasks=tuple(
            _task(t, g) for t, g in zip(tasks, guest_labels(row.meta, len(tasks)), strict=True)
        ),
        log_dir=row.log_dir,
    )
    native = {
        "role": row.role,
        "host": row.host,
        "force": row.force,
        "exclude": excludes,
        "whiteboard": row.whiteboard,
        **unpack(row.meta, [{k: getattr(t, k) for k in TASK_COLUMNS} for t in tasks]),
    }
    return view, native


def _set_view(row: AnyRow, recipes: list[tuple[RecipeView, dict[str, Any]]]) -> RecipeSetView:
    spec = RecipeSetSpec.model_validate(
        {
            "priority": row.priority,
            "max_retries": row.max_retries,
            "max_time": row.max_time,
            "locks": row.locks,
            "recipes": [native for _, native in recipes],
        }
    )
    return RecipeSetView(
        id=row.id,
        job_id=row.job_id,
        position=row.position,
        attempt=row.attempt,
        retry_of=row.retry_of,
        error=row.error,
        spec=spec,
        recipes=tuple(view for view, _ in recipes),
        submitted_at=row.submitted_at,
        lab=row.lab,
        started_at=row.started_at,
        finished_at=row.finished_at,
        supervisor_pid=row.supervisor_pid,
        supervisor_host=row.supervisor_host,
        heartbeat_at=row.heartbeat_at,
        stop_reason=row.stop_reason,
        extended=row.extended,
    )


def _task(row: AnyRow, guest: str | None) -> TaskView:
    return TaskView(
        id=row.id,
        name=row.name,
        status=row.status,
        result=None if row.result is None else Result(row.result),
        exit_code=row.exit_code,
        started_at=row.started_at,
        finished_at=row.finished_at,
        log_path=row.log_path,
        message=row.message,
        guest=guest,
    )


def _job_view(row: AnyRow, sets: list[RecipeSetView]) -> JobView:
    ref = None
    if row.ref_repo is not None:
        ref = {"repo": row.ref_repo, "branch": row.ref_branch, "commit": row.ref_commit}
    spec = JobSpec.model_validate(
        {
            "whiteboard": row.whiteboard,
            "group": row.group,
            "owner": row.owner,
            "depends": row.depends,
            "reason": row.reason,
            "ref": ref,
            "recipe_sets": [s.spec for s in sets if s.retry_of is None],
            "metadata": row.meta,
        }
    )
    return JobView(
        id=row.id,
        owner=row.owner,
        group=row.group,
        submitted_at=row.submitted_at,
        source_format=row.source_format,
        spec=spec,
        sets=tuple(sets),
        cloned_from=row.cloned_from,
    )
