"""Fetched tasks and guest recipes in the rows that exist (no column of their own yet).

A guest recipe's tasks are task rows of its host recipe, after the host's own,
so they have ids, states and results like any task and show under the host.
What has no column — a task's ``fetch`` and each guest's name, arguments,
role, whiteboard, metadata and task count — is kept in the host recipe's
metadata under :data:`STORED`, and taken out again when the spec is rebuilt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from labq.domain.job import RESERVED_METADATA, TaskSpec

STORED: Final = RESERVED_METADATA
# the task fields stored one column each (fetch goes to the recipe's metadata)
TASK_COLUMNS: Final = tuple(f for f in TaskSpec.model_fields if f != "fetch")


def pack(recipe: Mapping[str, Any]) -> tuple[dict[str, Any], list[Mapping[str, Any]]]:
    """A canonical recipe's metadata to store and its task rows (host's, then guests')."""
    tasks: list[Mapping[str, Any]] = list(recipe["tasks"])
    guests = []
    for guest in recipe.get("guests", []):
        tasks.extend(guest["tasks"])
        kept = {k: guest[k] for k in ("name", "args", "role", "whiteboard", "metadata")}
        guests.append({**kept, "tasks": len(guest["tasks"])})
    fetches = {str(i): t["fetch"] for i, t in enumerate(tasks) if t.get("fetch") is not None}
    meta = dict(recipe["metadata"])
    if fetches or guests:
        meta[STORED] = {"fetch": fetches, "guests": guests}
    return meta, tasks


def unpack(meta: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The canonical ``tasks``, ``guests`` and ``metadata`` of a recipe from its rows."""
    meta = dict(meta)
    stored = meta.pop(STORED, None) or {"fetch": {}, "guests": []}
    tasks = [{**row, "fetch": stored["fetch"].get(str(i))} for i, row in enumerate(rows)]
    own = len(tasks) - sum(g["tasks"] for g in stored["guests"])
    out_guests, at = [], own
    for guest in stored["guests"]:
        count = guest["tasks"]
        out_guests.append({**guest, "tasks": tasks[at : at + count]})
        at += count
    return {"tasks": tasks[:own], "guests": out_guests, "metadata": meta}


def guest_labels(meta: Mapping[str, Any], count: int) -> list[str | None]:
    """For each of a recipe's ``count`` task rows, the guest it belongs to (None: the host's).

    A guest is labelled by its name, else ``guest<N>`` (N counting from 1).
    """
    stored = meta.get(STORED) or {}
    guests = stored.get("guests", [])
    own = count - sum(int(g["tasks"]) for g in guests)
    labels: list[str | None] = [None] * own
    for n, guest in enumerate(guests, start=1):
        labels.extend([guest.get("name") or f"guest{n}"] * int(guest["tasks"]))
    return labels
