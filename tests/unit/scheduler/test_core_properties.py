"""Invariants of labq's policy over random labs, jobs and event orders (Hypothesis)."""

from __future__ import annotations

import itertools
from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labq.domain import requirements
from labq.domain.priority import Priority
from labq.domain.states import Condition, RecipeState, Usage
from labq.scheduler import decisions as d
from labq.sim import runner
from labq.sim.metrics import stuck
from labq.sim.scenario import parse_scenario
from labq.sim.world import World

PRIORITIES = [p.label for p in Priority]
KINDS = ["x", "y"]


@st.composite
def scenarios(draw, single_recipe=False, with_events=True):
    labs = draw(st.sampled_from([["lab1"], ["lab1", "lab2"]]))
    systems = []
    for lab in labs:
        for i in range(draw(st.integers(1, 4))):
            systems.append(
                {
                    "fqdn": f"{lab}-s{i}",
                    "lab": lab,
                    "attrs": {"kind": draw(st.sampled_from(KINDS))},
                    "pools": draw(st.sampled_from([[], ["p"]])),
                }
            )
    names = [s["fqdn"] for s in systems]
    hosts = st.sampled_from([{}, {"kind": "x"}, {"kind": "y"}]) | st.sampled_from(names).map(
        lambda f: {"fqdn": f}
    )
    outcome = st.sampled_from(["pass", "pass", "fail", "abort"]) | st.lists(
        st.sampled_from(names), min_size=1, max_size=2, unique=True
    ).map(lambda xs: {"abort_on": xs})
    jobs = []
    for j in range(draw(st.integers(1, 7))):
        width = 1 if single_recipe else draw(st.integers(1, 3))
        recipes = [
            {
                "host": draw(hosts),
                "duration": draw(st.integers(0, 200)),
                "outcome": draw(outcome),
            }
            for _ in range(width)
        ]
        jobs.append(
            {
                "id": f"j{j}",
                "submit_at": draw(st.integers(0, 300)),
                "group": draw(st.sampled_from([None, "qe", "other"])),
                "recipe_sets": [
                    {
                        "priority": draw(st.sampled_from(PRIORITIES)),
                        "max_retries": draw(st.integers(0, 2)),
                        "max_time": draw(st.sampled_from([None, 100, 250])),
                        "recipes": recipes,
                    }
                ],
            }
        )
    events = []
    if with_events:
        for _ in range(draw(st.integers(0, 4))):
            at = draw(st.integers(0, 600))
            kind = draw(st.sampled_from(["condition", "cancel", "priority"]))
            if kind == "condition":
                events.append(
                    {
                        "at": at,
                        "system": draw(st.sampled_from(names)),
                        "condition": draw(st.sampled_from(["automated", "broken", "removed"])),
                    }
                )
            elif kind == "cancel":
                events.append({"at": at, "cancel": draw(st.sampled_from(jobs))["id"]})
            else:
                events.append(
                    {
                        "at": at,
                        "job": draw(st.sampled_from(jobs))["id"],
                        "priority": draw(st.sampled_from(PRIORITIES)),
                    }
                )
    return {
        "config": {
            "aging": {"bump_after": draw(st.sampled_from([None, 100, 1000]))},
            "holds": {"per_lab": draw(st.integers(0, 3))},
            "retry": {"hard_limit": 2},
            "consistency_every": 150,
        },
        "labs": labs,
        "pools": [
            {
                "name": "p",
                "access": draw(
                    st.sampled_from([None, {"qe": "urgent", "everybody": "medium"}, {"qe": "high"}])
                ),
            }
        ],
        "systems": systems,
        "jobs": jobs,
        "events": events,
    }


def simulate(raw):
    return runner.simulate(parse_scenario(raw, source="hypothesis"), {}, "labq")


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(scenarios())
def test_no_system_ever_serves_two_recipes(raw):
    world = simulate(raw).world  # the Ledger raises on a double booking; check the runs too
    by_system = defaultdict(list)
    for recipe in world.recipes.values():
        if recipe.started_at is not None:
            end = recipe.finished_at if recipe.finished_at is not None else float("inf")
            by_system[recipe.ran_on].append((recipe.started_at, end, recipe.id))
    for runs in by_system.values():
        runs.sort()
        for (_, end, a), (start, _, b) in itertools.pairwise(runs):
            assert start >= end, f"recipes {a} and {b} overlap"


@SETTINGS
@given(scenarios())
def test_a_set_starts_all_together_in_one_lab_or_not_at_all(raw):
    world = simulate(raw).world
    for run in world.sets.values():
        if run.started_at is None:
            assert all(r.started_at is None for r in run.recipes)
            continue
        assert {r.started_at for r in run.recipes} == {run.started_at}
        labs = {world.ledger.systems[r.ran_on].lab for r in run.recipes}
        assert len(labs) == 1
        assert len({r.ran_on for r in run.recipes}) == len(run.recipes)


@SETTINGS
@given(scenarios())
def test_nothing_is_stuck_unless_no_system_could_ever_run_it(raw):
    world = simulate(raw).world
    for item in stuck(world):
        assert str(item["reason"]).startswith("unsatisfiable"), item


@SETTINGS
@given(scenarios(with_events=False))
def test_aborted_sets_are_retried_elsewhere_or_say_why_not(raw):
    world = simulate(raw).world
    clones = {run.retry_of: run for run in world.sets.values() if run.retry_of is not None}
    for run in world.sets.values():
        aborted = [
            r for r in run.recipes if r.state is RecipeState.ABORTED and r.started_at is not None
        ]
        if not aborted or run.attempt - 1 >= min(run.max_retries, 2):
            assert run.id not in clones
            continue
        clone = clones.get(run.id)
        if clone is None:
            assert run.error
            assert "not re-scheduled" in run.error
            continue
        assert clone.attempt == run.attempt + 1
        for old, new in zip(run.recipes, clone.recipes, strict=True):
            if old in aborted:
                assert old.ran_on in new.excluded
                assert new.ran_on != old.ran_on


class Watcher:
    """Wraps the policy and checks each Schedule against every waiting set's order."""

    def __init__(self, world: World, raw):
        self.world = world
        self.policy = world.policy
        self.caps = runner.access_policy(parse_scenario(raw, source="x"))
        self.known: set[int] = set()

    def key(self, run, system, now):
        cap = self.caps.maximum(system.pools, run.group)
        if cap is None:
            return None
        config = self.policy.config
        nominal = self.policy.sets[run.id].priority
        aged = nominal
        if config.aging_bump_after:
            levels = int((now - run.submitted) // config.aging_bump_after)
            aged = nominal.raised(levels, config.aging_ceiling)
        return (int(min(aged, cap)), int(aged), -run.submitted, -run.id)

    def check(self, decisions, now):
        for decision in decisions:
            if isinstance(decision, d.Schedule):
                system = self.world.ledger.systems[decision.system]
                chosen = self.key(self.world.sets[decision.set], system, now)
                for other in self.waiting(exclude=decision.set):
                    recipe = other.recipes[0]
                    viable = (
                        system.condition is Condition.AUTOMATED
                        and system.fqdn not in recipe.excluded
                        and requirements.matches(recipe.requirement, system.facts())
                    )
                    rival = self.key(other, system, now) if viable else None
                    assert rival is None or rival <= chosen, (decision, other.id)
            if isinstance(decision, d.Start | d.Cancel | d.Abort):
                self.known.discard(decision.set)

    def waiting(self, exclude):
        return [
            self.world.sets[i]
            for i in self.known
            if i != exclude
            and self.world.sets[i].started_at is None
            and self.world.sets[i].finished_at is None
        ]


@SETTINGS
@given(scenarios(single_recipe=True))
def test_a_free_system_goes_to_the_best_ordered_viable_recipe(raw):
    scenario = parse_scenario(raw, source="hypothesis")
    original_submit = World.submit
    original_apply = World.apply
    watchers = {}

    def submit(self, set_ids):
        watchers[id(self)].known.update(set_ids)
        original_submit(self, set_ids)

    def apply(self, decisions):
        watcher = watchers.setdefault(id(self), Watcher(self, raw))
        watcher.check(decisions, self.now)
        original_apply(self, decisions)

    World.submit, World.apply = submit, apply
    try:
        world = runner.simulate(scenario, {}, "labq").world
    finally:
        World.submit, World.apply = original_submit, original_apply
    assert all(s.usage in (Usage.IDLE, Usage.PENDING) for s in world.ledger.systems.values())
