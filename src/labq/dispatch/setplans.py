"""The plan of a started set, read from the database: what its supervisor runs.

The server's supervisor (:mod:`labq.dispatch.supervisor`) reads it for itself; for a lab
agent's set the server reads it and sends it over the wire (:mod:`labq.dispatch.remote`,
:mod:`labq.dispatch.planwire`). Apart from the supervisor so that the server, which only
builds plans, does not import what runs them (the SSH library above all: half a second of
every server's start).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from labq.dispatch.plan import GuestPlan, RecipePlan, SetPlan, SystemInfo, TaskPlan
from labq.dispatch.provisioning import provision_environment
from labq.domain.distro import DistroTree, choose_tree, requirement_of
from labq.domain.job import RecipeSpec, TaskSpec
from labq.domain.model import System
from labq.domain.requirements import RequirementError
from labq.domain.states import RecipeState
from labq.errors import LabqError
from labq.store import Repository
from labq.store.views import RecipeSetView, RecipeView, TaskView


class CannotRunError(LabqError):
    """The set cannot be run by this supervisor; the message says why, in one line."""


def load_plan(repo: Repository, set_id: int) -> SetPlan:
    """The plan of a started, unfinished set whose recipes all still wait to run."""
    view = repo.jobs.get_recipe_set(set_id)
    check_runnable(view)
    job = repo.jobs.load_job(view.job_id)
    recipes = []
    catalogues: dict[str, list[DistroTree]] = {}
    for recipe, spec in zip(view.recipes, view.spec.recipes, strict=True):
        assert recipe.system is not None  # check_runnable saw to it
        info = _system_info(repo.systems.get_system(recipe.system))
        if info.lab not in catalogues:
            catalogues[info.lab] = repo.distros.trees(info.lab)
        tree = _chosen_tree(spec, info, catalogues[info.lab])
        recipes.append(_recipe_plan(recipe, spec, info, tree))
    ref = job.spec.ref
    return SetPlan(
        id=view.id,
        job_id=view.job_id,
        recipes=tuple(recipes),
        max_time=None if view.spec.max_time is None else float(view.spec.max_time),
        ref_repo=None if ref is None else ref.repo,
        ref_commit=None if ref is None else ref.commit,
    )


def _system_info(system: System) -> SystemInfo:
    address = system.attributes.get("address")
    return SystemInfo(
        fqdn=system.fqdn,
        lab=system.lab,
        arch=system.arch,
        attributes=dict(system.attributes),
        address=address if isinstance(address, str) else None,
    )


def _chosen_tree(spec: RecipeSpec, info: SystemInfo, trees: list[DistroTree]) -> DistroTree | None:
    """The newest tree of the system's lab for its arch (and machine type) that the recipe's
    distro requirement admits; None when it names none (or brings its own)."""
    try:
        wanted = requirement_of(spec.metadata)
    except RequirementError:
        return None  # checked at submission; a stored one that no longer reads names no tree
    machine_type = info.attributes.get("machine_type")
    return choose_tree(trees, wanted, info.arch, str(machine_type) if machine_type else None)


def _recipe_plan(
    recipe: RecipeView, spec: RecipeSpec, info: SystemInfo, tree: DistroTree | None = None
) -> RecipePlan:
    """A recipe's plan on the system ``info``: its tasks, and its guests' with theirs."""
    # the guests' tasks are task rows of their host recipe, after its own
    specs = [*spec.tasks, *(t for g in spec.guests for t in g.tasks)]
    steps = [
        *task_steps(spec.metadata, len(spec.tasks)),
        *[None] * (len(specs) - len(spec.tasks)),
    ]
    plans = iter([_task_plan(v, t, n) for v, t, n in zip(recipe.tasks, specs, steps, strict=True)])
    tasks = tuple(next(plans) for _ in spec.tasks)
    guests = tuple(
        GuestPlan(
            system=dataclasses.replace(
                info,
                fqdn=guest.name or f"guest{n}.{info.fqdn}",
                address=None,
                guest_of=info.fqdn,
                guest_args=guest.args,
            ),
            tasks=tuple(next(plans) for _ in guest.tasks),
            role=guest.role,
        )
        for n, guest in enumerate(spec.guests, start=1)
    )
    return RecipePlan(
        id=recipe.id,
        system=info,
        tasks=tasks,
        role=spec.role,
        guests=guests,
        provision=provision_environment(spec.metadata, tree),
    )


def task_steps(metadata: Mapping[str, Any], count: int) -> list[int | None]:
    """The step of each task from ``metadata.task_steps`` (the teuthology reader writes it);
    no steps when it is missing or is not one whole number per task."""
    steps = metadata.get("task_steps")
    if (
        isinstance(steps, list)
        and len(steps) == count
        and all(isinstance(s, int) and not isinstance(s, bool) for s in steps)
    ):
        return list(steps)
    return [None] * count


def _task_plan(stored: TaskView, task: TaskSpec, step: int | None) -> TaskPlan:
    return TaskPlan(
        id=stored.id,
        name=task.name,
        command=task.run,
        params=dict(task.params),
        timeout=None if task.timeout is None else float(task.timeout),
        role=task.role,
        step=step,
        fetch_url=None if task.fetch is None else task.fetch.url,
        fetch_subdir=None if task.fetch is None else task.fetch.subdir,
    )


def check_runnable(view: RecipeSetView) -> None:
    """Refuse (:class:`CannotRunError`, saying why) a set that is not started or has ended,
    or a recipe that holds no system or has moved on from scheduled."""
    if view.started_at is None:
        raise CannotRunError(f"recipe set {view.id} has not been started by the scheduler")
    if view.finished_at is not None:
        raise CannotRunError(f"recipe set {view.id} has ended already")
    if view.stop_reason is not None:
        raise CannotRunError(f"recipe set {view.id} was asked to stop: {view.stop_reason}")
    for recipe in view.recipes:
        if recipe.system is None:
            raise CannotRunError(f"recipe {recipe.id} holds no system")
        if recipe.state is not RecipeState.SCHEDULED:
            # Tasks may have run already: running them again is not ours to decide.
            raise CannotRunError(
                f"recipe {recipe.id} is {recipe.state.value}: another supervisor ran this set"
            )
