"""Building a world from a scenario and running it to the end."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from labq.domain import requirements
from labq.domain.contention import LockNeeds
from labq.domain.distro import REQUIREMENT_KEY, DistroRequirement
from labq.domain.job import JobSpec
from labq.domain.locks import parse_locks
from labq.domain.locktable import Grant
from labq.domain.model import AccessPolicy, System
from labq.domain.requirements import Requirement
from labq.domain.states import Condition
from labq.errors import InputError
from labq.scheduler.vms import slots as vm_slots
from labq.scheduler.vms import vm_attributes
from labq.sim import world as w
from labq.sim.locking import Hold
from labq.sim.policy import Policy, registry
from labq.sim.predicting import Foresight
from labq.sim.runs import LockStep, RecipeRun, SetRun
from labq.sim.scenario import Scenario, SimJob, SimRecipe, SimRecipeSet
from labq.sim.world import World


@dataclass
class Run:
    """A finished simulation: the world as it ended and which policy made it."""

    policy: str
    world: World
    scenario: Scenario


def access_policy(scenario: Scenario) -> AccessPolicy:
    """Pool access rules of a scenario."""
    policy = AccessPolicy()
    for pool in scenario.pools:
        for group, cap in (pool.access or {}).items():
            policy.allow(pool.name, group, cap)
    return policy


def make_policy(name: str, scenario: Scenario, rng: random.Random) -> Policy:
    """A fresh policy by name."""
    policies = registry()
    if name not in policies:
        raise InputError(f"unknown policy {name!r} (expected one of {', '.join(policies)})")
    return policies[name](scenario.config.scheduler(), access_policy(scenario), rng)


def simulate(
    scenario: Scenario,
    files: dict[str, JobSpec],
    policy_name: str = "labq",
    seed: int = 0,
    *,
    policy: Policy | None = None,
    progress: Progress | None = None,
) -> Run:
    """Run one policy over a scenario to the end (or to ``config.until``).

    ``policy``: this policy object instead of a fresh one by name (the explorer
    replays its counterexamples through a core that records every call).
    ``progress``: called now and then with (set attempts ended, set attempts known).
    """
    if policy is None:
        policy = make_policy(policy_name, scenario, random.Random(seed))  # noqa: S311
    world, job_ids = build_world(scenario, files, policy)
    for job in scenario.jobs:
        world.at(job.submit_at, w.SUBMIT, job_ids[job.id])
    for event in scenario.events:
        world.at(event.at, w.CONDITION if event.condition else w.CONTROL, event)
    _loop(world, scenario, progress)
    return Run(policy_name, world, scenario)


def build_world(
    scenario: Scenario, files: dict[str, JobSpec], policy: Policy
) -> tuple[World, dict[str, tuple[int, ...]]]:
    """A world with the scenario's systems and its jobs' sets registered, nothing scheduled:
    the world, and each job's set ids (the explorer schedules events itself)."""
    world = World(
        policy=policy, access=access_policy(scenario), install_time=scenario.config.install_time
    )
    predicts = getattr(policy, "predicts", None)
    if predicts:
        world.foresight = Foresight(predicts)
    for spec in scenario.all_systems():
        system = System(
            fqdn=spec.fqdn,
            lab=spec.lab,
            arch=spec.arch,
            attributes=dict(spec.attrs),
            pools=frozenset(spec.pools),
        )
        world.add_system(system, spec.condition)
    for lab, trees in sorted(scenario.distros.items()):
        world.set_trees(lab, [t.tree(lab) for t in trees])
    # a scenario that names no tree checks no distro, as labq with an empty catalogue
    distros = bool(scenario.distros) or any(e.distros is not None for e in scenario.events)
    for lab, settings in sorted(scenario.vms.items()):
        quota = settings.quota(lab)
        for fqdn, size in vm_slots(quota):
            slot = System(fqdn, lab, quota.arch, vm_attributes(quota, size), quota.pools)
            world.add_system(slot, Condition.AUTOMATED, vm=size.name)
    job_ids = {}
    for job in scenario.jobs:
        sets = _job_sets(
            world, job, files.get(job.id), scenario.config.queue.lock_levels, distros=distros
        )
        job_ids[job.id] = tuple(world_set.id for world_set in sets)
    return world, job_ids


Progress = Callable[[int, int], None]
EVERY: Final = 256  # events between two progress reports: a report costs little, not nothing


def _loop(world: World, scenario: Scenario, progress: Progress | None = None) -> None:
    config = scenario.config
    world.at(config.consistency_every, w.CONSISTENCY)
    if world.policy.polls:
        world.at(0.0, w.TICK)
    events = 0
    while True:
        event = world.pop()
        if event is None:
            world.ended = world.now
            break
        time, kind, payload = event
        if config.until is not None and time > config.until:
            world.ended = config.until  # the clock moved past it to look: it ends at until
            break
        handle(world, kind, payload)
        events += 1
        if progress is not None and events % EVERY == 0:
            progress(world.closed, len(world.sets))
        if kind in (w.TICK, w.CONSISTENCY) and not _more_to_do(world):
            continue  # the periodic timers stop when nothing can change any more
        if kind == w.TICK:
            world.at(world.now + config.poll_every, w.TICK)
        elif kind == w.CONSISTENCY:
            world.at(world.now + config.consistency_every, w.CONSISTENCY)


MAX_IDLE_ROUNDS = 50


def _more_to_do(world: World) -> bool:
    if world.running() or world.has(w.SUBMIT, w.FINISH, w.CONDITION, w.CONTROL):
        world.idle_rounds = 0
        return True
    before = world.decisions
    # nothing runs and nothing will arrive: one more look, then stop if it changed nothing
    world.apply(world.policy.consistency_pass(world.now))
    if world.policy.polls:
        world.apply(world.policy.tick(world.now))
    if world.running():
        world.idle_rounds = 0
        return True
    # a policy that keeps deciding while nothing ever runs is going round in circles
    world.idle_rounds += 1
    return world.decisions != before and world.idle_rounds < MAX_IDLE_ROUNDS


def handle(world: World, kind: int, payload: tuple[object, ...]) -> None:
    """Carry out one event popped from the world's heap."""
    if kind == w.SUBMIT:
        (ids,) = payload
        assert isinstance(ids, tuple)
        world.submit(ids)
    elif kind == w.FINISH:
        world.finish_set(*payload)  # type: ignore[arg-type]
    elif kind == w.RUNNING:
        world.mark_running(*payload)  # type: ignore[arg-type]
    elif kind == w.RELEASE:
        set_id, hold = payload
        assert isinstance(set_id, int)
        assert isinstance(hold, Hold)
        world.locking.release(set_id, hold)
    elif kind == w.STEP:
        world.locking.step(*payload)  # type: ignore[arg-type]
    elif kind == w.TICK:
        world.apply(world.policy.tick(world.now))
    elif kind == w.CONSISTENCY:
        world.apply(world.policy.consistency_pass(world.now))
    else:
        scenario_event(world, payload[0])


def scenario_event(world: World, event: object) -> None:
    """An admin's event of the scenario: a condition change, a cancel, a priority change."""
    from labq.sim.scenario import SimEvent

    assert isinstance(event, SimEvent)
    if event.system is not None and event.condition is not None:
        world.set_condition(event.system, event.condition)
    elif event.system is not None and event.person is not None:
        world.apply(world.policy.hold_system(event.system, event.person, world.now))
        if event.hold is not None:  # the reservation runs out
            ends = SimEvent(at=world.now + event.hold, system=event.system, release=True)
            world.at(ends.at, w.CONTROL, ends)
    elif event.system is not None and event.release:
        world.apply(world.policy.release_system(event.system, world.now))
    elif event.lab is not None and event.distros is not None:
        world.set_trees(event.lab, [t.tree(event.lab) for t in event.distros])
    elif event.lab is not None and event.pause is not None:
        change = world.policy.pause_lab if event.pause else world.policy.resume_lab
        world.apply(change(event.lab, world.now))
    elif event.cancel is not None:
        ids = [i for i in world.jobs.get(event.cancel, []) if world.sets[i].finished_at is None]
        for i in ids:
            if i not in world.submitted:
                world.cancel_unsubmitted(i)
        known = [i for i in ids if i in world.submitted]
        world.apply(world.policy.cancel(known, world.now))
    elif event.job is not None and event.priority is not None:
        ids = [i for i in world.jobs.get(event.job, []) if world.sets[i].finished_at is None]
        for i in ids:
            world.sets[i].priority = event.priority
        known = [i for i in ids if i in world.submitted]
        world.apply(world.policy.change_priority(known, event.priority, world.now))


def _job_sets(
    world: World, job: SimJob, spec: JobSpec | None, levels: tuple[str, ...], *, distros: bool
) -> list[SetRun]:
    """The set attempts of one scenario job, registered in the world."""
    if job.recipe_sets is not None:
        sets = job.recipe_sets
    else:
        if spec is None:
            from labq.formats.native import validate_native

            spec = validate_native(job.job, source=f"job {job.id}")
        sets = [_from_spec(rs, job) for rs in spec.model_dump()["recipe_sets"]]
    runs = []
    for index, rs in enumerate(sets):
        run = SetRun(
            id=world.new_id(),
            job=job.id,
            index=index,
            attempt=1,
            submitted=job.submit_at,
            priority=rs.priority,
            group=job.group,
            max_time=rs.max_time,
            max_retries=rs.max_retries,
            locks=LockNeeds.of(parse_locks(rs.locks, levels)),
            recipes=[],
            signature=tuple((level, key) for level, key in job.signature),
            predicted=rs.predicted,
        )
        run.recipes = _recipe_runs(world, run.id, rs, distros=distros)
        world.add_set(run)
        runs.append(run)
    return runs


Parsed = tuple[
    Requirement, str | list[str], frozenset[str], tuple[LockStep, ...], DistroRequirement | None
]


def _recipe_runs(
    world: World, set_id: int, recipe_set: SimRecipeSet, *, distros: bool
) -> list[RecipeRun]:
    """The recipe attempts of a set (a trace's set repeats one recipe N times: parse it once);
    ``distros``: with their distro requirements."""
    parsed: dict[int, Parsed] = {}
    runs = []
    for recipe in recipe_set.recipes:
        known = parsed.get(id(recipe))
        if known is None:
            outcome = recipe.outcome
            known = parsed[id(recipe)] = (
                requirements.parse(recipe.host),
                outcome if isinstance(outcome, str) else list(outcome.abort_on),
                frozenset(recipe.exclude),
                lock_plan(recipe),
                None
                if recipe.distro is None or not distros
                else DistroRequirement.of(recipe.distro),
            )
        requirement, outcome_of, excluded, plan, distro = known
        runs.append(
            RecipeRun(
                id=world.new_id(),
                set_id=set_id,
                role=recipe.role,
                requirement=requirement,
                duration=recipe.duration,
                outcome=outcome_of if isinstance(outcome_of, str) else list(outcome_of),
                excluded=excluded,
                force=recipe.force,
                plan=plan,
                distro=distro,
            )
        )
    return runs


def lock_plan(recipe: SimRecipe) -> tuple[LockStep, ...]:
    """A recipe's lock plan in the order its steps come (``at``, then as written)."""
    steps = [
        LockStep(Grant(step.level, step.name, step.exclusive), step.at, step.hold)
        for step in recipe.lock_plan
    ]
    return tuple(sorted(steps, key=lambda step: step.at))


def _from_spec(raw: dict[str, object], job: SimJob) -> SimRecipeSet:
    """A native recipe set with the job's default duration and outcome per recipe."""
    recipes = []
    for recipe in raw["recipes"]:  # type: ignore[attr-defined]
        recipes.append(
            {
                "role": recipe["role"],
                "host": recipe["host"],
                "distro": (recipe.get("metadata") or {}).get(REQUIREMENT_KEY),
                "force": recipe["force"],
                "exclude": recipe["exclude"],
                "duration": job.duration,
                "outcome": job.outcome,
            }
        )
    return SimRecipeSet.model_validate(
        {
            "priority": raw["priority"],
            "max_retries": raw["max_retries"],
            "max_time": raw["max_time"],
            "locks": raw.get("locks") or {},
            "recipes": recipes,
        }
    )
