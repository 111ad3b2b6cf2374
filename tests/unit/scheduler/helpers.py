"""Running small scenarios through the real core."""

from __future__ import annotations

from typing import Any

from labq.sim.metrics import stuck
from labq.sim.runner import Run, simulate
from labq.sim.scenario import parse_scenario


def run(scenario: dict[str, Any], policy: str = "labq") -> Run:
    return simulate(parse_scenario(scenario, source="test"), {}, policy)


def rows(result: Run, job: str) -> list[dict[str, Any]]:
    from labq.sim.metrics import recipe_rows

    return [r for r in recipe_rows(result.world) if r["job"] == job]


def started_at(result: Run, job: str, attempt: int = 1) -> float | None:
    runs = [s for s in result.world.sets.values() if s.job == job and s.attempt == attempt]
    assert runs, f"no set for {job}"
    return runs[0].started_at


def stuck_jobs(result: Run) -> list[str]:
    return [str(item["job"]) for item in stuck(result.world)]


def systems(n: int, lab: str = "lab1", **extra: Any) -> list[dict[str, Any]]:
    return [{"fqdn": f"s{i}.{lab}", "lab": lab, **extra} for i in range(1, n + 1)]
