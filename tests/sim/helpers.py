"""Small builders for simulator tests."""

from __future__ import annotations

from typing import Any

from labq.sim.runner import Run, simulate
from labq.sim.runs import SetRun
from labq.sim.scenario import parse_scenario


def run(data: dict[str, Any], policy: str, seed: int = 0) -> Run:
    """Simulate a scenario given as plain data."""
    return simulate(parse_scenario(data, source="test"), {}, policy, seed)


def job(ident: str, at: float, *recipes: dict[str, Any], **set_keys: Any) -> dict[str, Any]:
    """A scenario job with one recipe set."""
    return {"id": ident, "submit_at": at, "recipe_sets": [{**set_keys, "recipes": list(recipes)}]}


def the_set(result: Run, job_id: str) -> SetRun:
    """The first set attempt of a job."""
    world = result.world
    return world.sets[world.jobs[job_id][0]]


def started(result: Run, job_id: str) -> float | None:
    """When the job's (first) set started, None if never."""
    return the_set(result, job_id).started_at
