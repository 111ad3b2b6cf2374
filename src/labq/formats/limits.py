"""How big a job may be: the ``limits:`` section of the settings, and the check of a job.

A document over ``document_bytes`` is refused before it is read (413 from the
API); one nested deeper than ``depth`` is refused while it is parsed; a job with
too many sets, recipes in a set or tasks in a recipe (its guests' included) is
refused naming the limit and the place (422), as soon as the reader meets the
list that is too long where it can (``native_lists``, ``teuthology_lists``,
Beaker's elements counted before they are read), else once it is parsed.
``labq validate`` applies the same limits.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field

from labq.domain.job import JobSpec
from labq.errors import InputError
from labq.formats.bounds import ListLimit, ListLimits
from labq.formats.source import MAX_DEPTH, MAX_DOCUMENT_BYTES

DEFAULT_EXTEND: Final = 24 * 3600  # a day more, as Beaker's admins often allow
MAX_EXTEND: Final = 2**31 - 1  # what an ``integer`` column holds


class Limits(BaseModel):
    """The ``limits:`` settings; every one is a hard refusal, never a truncation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    document_bytes: Annotated[int, Field(gt=0, le=64 * 1024 * 1024)] = MAX_DOCUMENT_BYTES
    # the parsers recurse once per level: past a few hundred, Python's stack would not do
    depth: Annotated[int, Field(ge=8, le=200)] = MAX_DEPTH
    sets_per_job: Annotated[int, Field(ge=1)] = 100
    recipes_per_set: Annotated[int, Field(ge=1)] = 50
    tasks_per_recipe: Annotated[int, Field(ge=1)] = 500
    # how far a running set's max_time may be extended in all (``labq job extend``), seconds
    max_extend: Annotated[int, Field(ge=0, le=MAX_EXTEND)] = DEFAULT_EXTEND


def check_counts(spec: JobSpec, limits: Limits, *, source: str) -> None:
    """Refuse a job with more sets, recipes in a set or tasks in a recipe than allowed."""
    for count, name, what, place in _counts(spec):
        limit: int = getattr(limits, name)
        if count > limit:
            raise InputError(
                f"{count} {what} is more than the limit of {limit} (limits.{name})",
                source=source,
                place=place,
            )


def _counts(spec: JobSpec) -> Iterator[tuple[int, str, str, str]]:
    """(count, limit's name, what is counted, place) for every count a limit bounds."""
    yield len(spec.recipe_sets), "sets_per_job", "recipe sets", "recipe_sets"
    for i, rset in enumerate(spec.recipe_sets):
        place = f"recipe_sets[{i}].recipes"
        yield len(rset.recipes), "recipes_per_set", "recipes", place
        for j, recipe in enumerate(rset.recipes):
            # a guest's tasks are its host recipe's (stored and run with them)
            tasks = len(recipe.tasks) + sum(len(g.tasks) for g in recipe.guests)
            yield tasks, "tasks_per_recipe", "tasks", f"{place}[{j}].tasks"


def native_lists(limits: Limits) -> ListLimits:
    """The lists of a native document that the limits bound, by place."""
    sets = ListLimit(limits.sets_per_job, "sets_per_job", "recipe sets")
    recipes = ListLimit(limits.recipes_per_set, "recipes_per_set", "recipes")
    tasks = ListLimit(limits.tasks_per_recipe, "tasks_per_recipe", "tasks")
    recipe = ("recipe_sets", int, "recipes", int)
    return ListLimits(
        [
            (("recipe_sets",), sets),
            (("recipe_sets", int, "recipes"), recipes),
            ((*recipe, "tasks"), tasks),
            ((*recipe, "guests", int, "tasks"), tasks),
        ]
    )


def teuthology_lists(limits: Limits) -> ListLimits:
    """The lists of a teuthology document that the limits bound while it is read: each
    command of ``exec`` (or ``sh``) for a role is a task of its recipe. (Its recipes and
    other tasks are counted on the job it makes, before that is validated.)"""
    commands = ListLimit(limits.tasks_per_recipe, "tasks_per_recipe", "commands (tasks)")
    return ListLimits(
        [
            (("tasks", int, "exec", str), commands),
            (("tasks", int, "sh", str), commands),
        ]
    )
