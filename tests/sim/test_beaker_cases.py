"""Beaker's scheduler tests that labq once failed, as `labq sim` scenarios (issue 11, item 7)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from labq.domain.priority import Priority
from labq.domain.requirements import parse
from labq.scheduler import decisions as d
from labq.scheduler.core import Scheduler
from labq.scheduler.entries import RecipeSubmission, SetSubmission, SystemEntry
from labq.sim.metrics import recipe_rows, stuck

from .helpers import job, run, started

EXAMPLES = Path(__file__).parents[2] / "examples" / "sim"
ANY = parse({})


def example(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return data


def systems_of(result: Any, job_id: str) -> dict[str | None, str | None]:
    return {r["role"]: r["system"] for r in recipe_rows(result.world) if r["job"] == job_id}


def test_a_holder_moves_to_a_lab_that_can_start_it_whole():
    result = run(example("hold-moves-lab.yaml"), "labq")
    assert started(result, "pair") == 1000
    assert systems_of(result, "pair") == {"one": "b1", "two": "b2"}


def test_a_set_does_not_hold_where_a_system_it_needs_is_manual():
    data = example("hold-moves-lab.yaml")
    data["systems"][0]["condition"] = "manual"  # a1
    data["jobs"] = [j for j in data["jobs"] if j["id"] != "busy-a1"]
    result = run(data, "labq")
    assert started(result, "pair") == 1000
    assert systems_of(result, "pair") == {"one": "b1", "two": "b2"}


def test_the_consistency_pass_frees_a_hold_that_can_never_complete():
    # labA alone: the pair holds a2 while a1 runs; a1 is then made manual, so the
    # hold can never complete. The pass gives a2 back, and a job that needs a2 runs.
    data = example("hold-moves-lab.yaml")
    data["labs"] = ["labA"]
    data["systems"] = data["systems"][:2]
    data["jobs"] = [j for j in data["jobs"] if j["id"] != "busy-b2"]  # busy-a1 runs 5000 s on a1
    for recipe in data["jobs"][1]["recipe_sets"][0]["recipes"]:
        recipe["host"] = recipe["host"]["or"][0]  # a1, a2
    data["jobs"].append(job("needs-a2", 700, {"host": {"fqdn": "a2"}, "duration": 60}))
    data["events"] = [{"at": 10, "system": "a1", "condition": "manual"}]
    data["config"] = {"consistency_every": 600}
    result = run(data, "labq")
    assert started(result, "needs-a2") == 700
    pair = [item for item in stuck(result.world) if item["job"] == "pair"]
    assert len(pair) == 1
    assert "holding nothing" in str(pair[0]["reason"])


def test_the_order_key_holds_within_a_job():
    result = run(example("job-order.yaml"), "labq")
    rows = {r["recipe_set"]: r["started"] for r in recipe_rows(result.world)}
    assert rows == {1: 0.0, 0: 100.0}  # the urgent set (index 1) first


def test_the_order_key_holds_across_jobs_handed_over_together():
    # the service hands the core several jobs' sets at once after a restart
    core = Scheduler()
    core.add_system(SystemEntry("box", "lab1", {"fqdn": "box"}, frozenset()), 0.0)
    sets = [
        SetSubmission(1, job=1, recipes=(RecipeSubmission(11, ANY),), priority=Priority.NORMAL),
        SetSubmission(2, job=2, recipes=(RecipeSubmission(21, ANY),), priority=Priority.URGENT),
    ]
    decisions = core.submit(sets, 1.0)
    assert [x.set for x in decisions if isinstance(x, d.Start)] == [2]


def test_a_set_takes_the_system_fewest_waiting_sets_could_use():
    result = run(example("rare-system.yaml"), "labq")
    assert systems_of(result, "pair") == {"anywhere": "z-plain", "needs-gpu": "a-gpu"}
    starts = {r["role"]: r["started"] for r in recipe_rows(result.world)}
    assert starts == {"anywhere": 0.0, "needs-gpu": 0.0}


def test_with_nothing_waiting_for_it_a_system_is_chosen_by_name():
    data = example("rare-system.yaml")
    data["jobs"][0]["recipe_sets"].pop()  # no set waits for the GPU
    result = run(data, "labq")
    assert systems_of(result, "pair") == {"anywhere": "a-gpu"}


def test_a_set_of_a_batch_placed_by_an_offer_meanwhile_is_not_placed_again():
    # a job's sets are placed best-ranked first, offering freed systems in between:
    # one of them may start from such an offer before its turn (found by random_scenario)
    from .test_invariants import random_scenario

    result = run(random_scenario(111), "labq", 111)
    assert stuck(result.world) == []
