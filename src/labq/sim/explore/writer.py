"""A counterexample as a ``labq sim`` scenario that replays it event for event.

Each path of the explorer is a simulator run (:mod:`.point`): jobs are
submitted at their instant, a set that ended ran for exactly the instants it
ran (aborting on its first recipe's system if it aborted), admins' events come
at their instant in the order taken, the consistency pass runs every second,
and the run stops after the last instant of the path.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from labq.sim.explore.lab import Lab
from labq.sim.explore.point import Event
from labq.sim.explore.recorder import Call, Recorder
from labq.sim.explore.search import Finding, Step, replay
from labq.sim.runner import access_policy, simulate
from labq.sim.runs import RecipeRun
from labq.sim.scenario import load_scenario


def scenario_of(lab: Lab, path: tuple[Step, ...]) -> dict[str, Any]:
    """The scenario data that replays ``path`` under ``labq sim``."""
    point, context, _ = replay(lab, path)
    last = max((at for at, _ in path), default=0)
    data = copy.deepcopy(dict(lab.scenario))
    data["config"] = {**data.get("config", {}), "consistency_every": 1, "until": last + 0.5}
    submitted = {event.target: at for at, event in path if event.what == "submit"}
    for job in data["jobs"]:
        job["submit_at"] = submitted.get(job["id"], last + 1)  # after ``until``: never
        run = point.world.sets[context.set_of(job["id"])]
        recipes = job["recipe_sets"][0]["recipes"]
        job["recipe_sets"][0]["recipes"] = [
            _recipe(spec, ran) for spec, ran in zip(recipes, run.recipes, strict=True)
        ]
    events = []
    for at, event in path:
        if event.what == "condition":
            events.append({"at": at, "system": event.target, "condition": event.value})
        elif event.what == "cancel":
            events.append({"at": at, "cancel": event.target})
        elif event.what == "priority":
            events.append({"at": at, "job": event.target, "priority": event.value})
        elif event.what == "distros":
            trees = [dict(t) for t in lab.distros[int(event.value)][1]]
            events.append({"at": at, "lab": event.target, "distros": trees})
    if events:
        data["events"] = events
    return data


def write(lab: Lab, finding: Finding, target: str | Path) -> Path:
    """Write the finding's scenario to ``target``, the finding itself in a comment on top."""
    path = Path(target)
    steps = "\n".join(f"#   t={at} {event}" for at, event in finding.path)
    header = (
        f"# Found by the explorer of event orders (lab {lab.name}):\n"
        f"#   {finding.violation}\n# The shortest sequence of events that shows it:\n{steps}\n"
    )
    body = yaml.safe_dump(scenario_of(lab, finding.path), sort_keys=False)
    path.write_text(header + body, encoding="utf-8")
    return path


def read_path(scenario: str | Path) -> tuple[Step, ...]:
    """The event sequence a written scenario's header lists."""
    steps = []
    for line in Path(scenario).read_text(encoding="utf-8").splitlines():
        if not line.startswith("#   t="):
            continue
        at, _, event = line.removeprefix("#   t=").partition(" ")
        steps.append((int(at), Event.parse(event)))
    return tuple(steps)


def reproduce(lab: Lab, scenario: str | Path) -> list[Call]:
    """Run a written scenario under ``labq sim`` with the lab's core: every call it got
    that decided something or was not a consistency pass (see :func:`essential`)."""
    parsed, files = load_scenario(scenario)
    core = Recorder(lab.core(parsed.config.scheduler(), access_policy(parsed)))
    simulate(parsed, files, policy=core)
    return essential(core.log)


def essential(calls: list[Call]) -> list[Call]:
    """The calls but consistency passes that decided nothing.

    The simulator adds such a pass when nothing runs and no event is left to
    come, which depends on the rest of the scenario: the explorer cannot know it.
    """
    return [c for c in calls if c[0] != "consistency_pass" or c[3]]


def _recipe(spec: dict[str, Any], ran: RecipeRun) -> dict[str, Any]:
    """The recipe as it ran on the path: its duration (never ended: ``UNDECIDED``), and the
    system it aborted on if it did."""
    out = dict(spec)
    out["duration"] = ran.duration
    if isinstance(ran.outcome, list):
        out["outcome"] = {"abort_on": list(ran.outcome)}
    return out
