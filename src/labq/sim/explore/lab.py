"""A small lab to explore: a ``labq sim`` scenario, and which events the world may produce."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from labq.domain.model import AccessPolicy
from labq.domain.priority import Priority
from labq.domain.states import Condition
from labq.scheduler.core import Scheduler
from labq.scheduler.entries import SchedulerConfig
from labq.sim.scenario import Scenario, parse_scenario

# A recipe's duration until the explorer decides when its set ends: never, as far as a
# path goes (a set with ``max_time`` is still stopped by the watchdog at its declared end).
UNDECIDED: Final = 1_000_000.0

Core = Callable[[SchedulerConfig, AccessPolicy], Scheduler]


def real_core(config: SchedulerConfig, access: AccessPolicy) -> Scheduler:
    """The scheduling core as it is."""
    return Scheduler(config, access)


@dataclass(frozen=True)
class Lab:
    """A small lab and the events its world may produce.

    ``scenario`` is ``labq sim`` scenario data (docs/simulation.md): systems,
    pools and jobs of one recipe set each (recipe durations and outcomes are the
    explorer's to choose). Every job may be submitted at any instant up to
    ``horizon``, or never; each running set may end at any later instant (or
    abort, for the jobs in ``aborts``); each listed condition change, priority
    change, cancel and change of a lab's distro trees (``distros``: the lab and the
    trees it carries from then on) may happen once, at any instant up to ``horizon``. After
    it, for ``drain`` more instants, only running sets end and time passes (the
    liveness check needs the queue to drain).
    """

    name: str
    scenario: Mapping[str, Any]
    horizon: int = 3
    drain: int = 4
    conditions: tuple[tuple[str, Condition], ...] = ()
    priorities: tuple[tuple[str, Priority], ...] = ()
    cancels: tuple[str, ...] = ()
    distros: tuple[tuple[str, tuple[Mapping[str, Any], ...]], ...] = ()
    aborts: tuple[str, ...] = ()
    core: Core = field(default=real_core, compare=False)  # a test swaps in a broken rule

    @property
    def end(self) -> int:
        """The last instant explored."""
        return self.horizon + self.drain

    @property
    def jobs(self) -> list[str]:
        """Job ids, in the scenario's order (their sets' ids follow it)."""
        return [str(job["id"]) for job in self.scenario["jobs"]]

    def parsed(self) -> Scenario:
        """The scenario as the explorer runs it: the consistency pass every instant,
        recipes running until the explorer ends them."""
        return parse_scenario(explored_data(self.scenario), source=f"lab {self.name}")


def explored_data(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """Scenario data with ``consistency_every: 1`` and every recipe undecided."""
    data = copy.deepcopy(dict(scenario))
    data["config"] = {**data.get("config", {}), "consistency_every": 1}
    for job in data["jobs"]:
        if len(job["recipe_sets"]) != 1:
            raise ValueError(f"job {job['id']}: the explorer takes one recipe set per job")
        for recipe in job["recipe_sets"][0]["recipes"]:
            recipe["duration"] = UNDECIDED
            recipe.pop("outcome", None)
        job.pop("submit_at", None)
    return data


def job(ident: str, width: int = 1, **set_keys: Any) -> dict[str, Any]:
    """A scenario job of one set of ``width`` recipes (``host``: each recipe's requirement)."""
    host = set_keys.pop("host", None)
    group = set_keys.pop("group", None)
    recipe: dict[str, Any] = {} if host is None else {"host": host}
    out: dict[str, Any] = {"id": ident, "recipe_sets": [{**set_keys, "recipes": [recipe] * width}]}
    if group is not None:
        out["group"] = group
    return out


def systems(lab: str, names: Sequence[str], **keys: Any) -> list[dict[str, Any]]:
    """Scenario systems of one lab."""
    return [{"fqdn": name, "lab": lab, **keys} for name in names]
