"""What kind of work a recipe set is: the keys its run-time prediction looks up history by.

Two keys are worked out once, when a set is stored, from the job's canonical (native
JSON) form:

- the **source** key: the job as written — its ref's repository and branch (not the
  commit: the same suite on the next commit is the same job), and the set's position,
  recipes, tasks with their parameters and ``max_time``; not the whiteboard, the
  priority, the excludes nor the metadata, which change from one submission of the
  same job to the next. A clone takes its original's key instead, so a clone chain
  shares one;
- the **work** key: coarser, the recipes' host requirements, roles and task names only
  (the same task list on the same kind of systems, whoever wrote the job).

The owner and the group are the coarser keys still; they are the job's own. Each key is
a stable digest: the same input gives the same key in every process and version of
Python.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

KEY_LENGTH: Final = 16  # hex digits: 64 bits, no two kinds of one lab's jobs collide


@dataclass(frozen=True)
class SetKinds:
    """A stored set's two keys (None for sets stored before labq kept them)."""

    source: str | None
    work: str | None


def set_kinds(job: Mapping[str, Any], position: int, recipe_set: Mapping[str, Any]) -> SetKinds:
    """The keys of the set at ``position`` of ``job`` (both canonical native forms)."""
    ref = job.get("ref") or {}
    recipes = [_recipe(r, with_params=True) for r in recipe_set["recipes"]]
    source = {
        "ref": [ref.get("repo"), ref.get("branch")],
        "position": position,
        "max_time": recipe_set.get("max_time"),
        "recipes": recipes,
    }
    work = [_recipe(r, with_params=False) for r in recipe_set["recipes"]]
    return SetKinds(digest(source), digest(work))


def digest(value: object) -> str:
    """A short stable digest of a JSON value (keys sorted)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_LENGTH]


def _recipe(recipe: Mapping[str, Any], *, with_params: bool) -> dict[str, Any]:
    guests = recipe.get("guests") or []
    return {
        "role": recipe.get("role"),
        "host": recipe.get("host"),
        "tasks": [_task(t, with_params) for t in recipe.get("tasks") or []],
        "guests": [[_task(t, with_params) for t in g.get("tasks") or []] for g in guests],
    }


def _task(task: Mapping[str, Any], with_params: bool) -> object:
    if not with_params:
        return task.get("name")
    return [task.get("name"), task.get("run"), task.get("params") or {}, task.get("role")]
