"""A :class:`~labq.dispatch.plan.SetPlan` as JSON, for a supervisor on another host.

The server builds the plan from the database (``labq.dispatch.setplans.load_plan``)
and sends it to the agent that claimed the set; the agent's supervisor reads it
back. Plans are plain frozen values, so the JSON is their fields by name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from labq.dispatch.plan import GuestPlan, PlanError, RecipePlan, SetPlan, SystemInfo, TaskPlan


def plan_to_json(plan: SetPlan) -> dict[str, Any]:
    """The plan as JSON-ready data (every mapping a plain dict)."""
    data: dict[str, Any] = _plain(dataclasses.asdict(plan))
    return data


def plan_from_json(data: Mapping[str, Any]) -> SetPlan:
    """The plan back from :func:`plan_to_json`'s data; :class:`PlanError` when it is not one."""
    try:
        recipes = tuple(_recipe(r) for r in data["recipes"])
        return SetPlan(
            id=int(data["id"]),
            job_id=int(data["job_id"]),
            recipes=recipes,
            max_time=_float(data.get("max_time")),
            ref_repo=data.get("ref_repo"),
            ref_commit=data.get("ref_commit"),
            env=dict(data.get("env") or {}),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanError(f"the set's plan is not one labq can read: {exc!r}") from exc


def _recipe(data: Mapping[str, Any]) -> RecipePlan:
    return RecipePlan(
        id=int(data["id"]),
        system=_system(data["system"]),
        tasks=tuple(_task(t) for t in data.get("tasks") or ()),
        role=data.get("role"),
        guests=tuple(
            GuestPlan(
                system=_system(g["system"]),
                tasks=tuple(_task(t) for t in g.get("tasks") or ()),
                role=g.get("role"),
            )
            for g in data.get("guests") or ()
        ),
        provision=dict(data.get("provision") or {}),
    )


def _system(data: Mapping[str, Any]) -> SystemInfo:
    return SystemInfo(
        fqdn=str(data["fqdn"]),
        lab=str(data["lab"]),
        arch=str(data.get("arch") or "x86_64"),
        attributes=dict(data.get("attributes") or {}),
        address=data.get("address"),
        guest_of=data.get("guest_of"),
        guest_args=data.get("guest_args"),
    )


def _task(data: Mapping[str, Any]) -> TaskPlan:
    return TaskPlan(
        id=int(data["id"]),
        name=str(data["name"]),
        command=data.get("command"),
        params=dict(data.get("params") or {}),
        timeout=_float(data.get("timeout")),
        role=data.get("role"),
        step=None if data.get("step") is None else int(data["step"]),
        fetch_url=data.get("fetch_url"),
        fetch_subdir=data.get("fetch_subdir"),
    )


def _float(value: object) -> float | None:
    return None if value is None else float(str(value))


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
