"""Systems reserved or loaned to a person, and paused labs, through the real core (and the
baselines) in ``labq sim`` scenarios."""

from __future__ import annotations

from typing import Any

import pytest

from labq.errors import InputError
from labq.sim.scenario import parse_scenario
from tests.unit.scheduler.helpers import rows, run, started_at, systems

POLICIES = ["labq", "beaker-batch", "easy"]
POLL = 60.0  # beaker-batch looks every minute (the scenario's default poll_every)


def soon_after(started: float | None, moment: float, policy: str) -> bool:
    """Started at ``moment`` (the event-driven policies), or at the next poll."""
    assert started is not None
    late = POLL if policy == "beaker-batch" else 0.0
    return moment <= started <= moment + late


def two_jobs(*events: dict[str, Any], lab_systems: int = 1) -> dict[str, Any]:
    """``first`` runs 100 s from 0, ``second`` arrives at 1 and runs 10 s, on lab1's systems."""
    return {
        "labs": ["lab1"],
        "systems": systems(lab_systems),
        "jobs": [
            {"id": "first", "recipe_sets": [{"recipes": [{"duration": 100}]}]},
            {"id": "second", "submit_at": 1, "recipe_sets": [{"recipes": [{"duration": 10}]}]},
        ],
        "events": list(events),
    }


@pytest.mark.parametrize("policy", POLICIES)
def test_a_loaned_system_serves_nobody_until_it_is_returned(policy: str) -> None:
    scenario = two_jobs(
        {"at": 50, "system": "s1.lab1", "loan": "bob"},
        {"at": 300, "system": "s1.lab1", "release": True},
    )
    result = run(scenario, policy)
    assert started_at(result, "first") == 0  # the loan lets the running recipe end
    assert soon_after(started_at(result, "second"), 300, policy)


def test_without_the_loan_the_queued_job_runs_when_the_first_ends() -> None:
    assert started_at(run(two_jobs()), "second") == 100


@pytest.mark.parametrize("policy", POLICIES)
def test_a_reservation_for_a_while_ends_by_itself(policy: str) -> None:
    scenario = two_jobs({"at": 0, "system": "s1.lab1", "reserve": "alice", "for": 250})
    result = run(scenario, policy)
    first = started_at(result, "first")
    assert soon_after(first, 250, policy)
    assert soon_after(started_at(result, "second"), (first or 0) + 100, policy)


def test_a_reserved_system_is_passed_over_for_a_free_one() -> None:
    scenario = two_jobs({"at": 0, "system": "s1.lab1", "reserve": "alice"}, lab_systems=2)
    result = run(scenario)
    assert [r["system"] for r in rows(result, "first")] == ["s2.lab1"]
    assert started_at(result, "second") == 100  # s1 stays reserved: second waits for s2
    assert [r["system"] for r in rows(result, "second")] == ["s2.lab1"]


def test_a_set_holding_a_system_gives_it_back_when_it_is_reserved() -> None:
    """``wide`` holds s1 while waiting for s2 (busy until 100); alice reserves s1 at 50."""
    scenario = {
        "labs": ["lab1"],
        "systems": systems(2),
        "jobs": [
            {
                "id": "long",
                "recipe_sets": [{"recipes": [{"duration": 100, "host": {"fqdn": "s2.lab1"}}]}],
            },
            {"id": "wide", "submit_at": 1, "recipe_sets": [{"recipes": [{"duration": 10}] * 2}]},
        ],
        "events": [
            {"at": 50, "system": "s1.lab1", "reserve": "alice"},
            {"at": 400, "system": "s1.lab1", "release": True},
        ],
    }
    result = run(scenario)
    assert started_at(result, "wide") == 400
    assert {r["state"] for r in rows(result, "wide")} == {"completed"}


@pytest.mark.parametrize("policy", POLICIES)
def test_a_paused_lab_starts_nothing_until_resumed(policy: str) -> None:
    scenario = two_jobs(
        {"at": 0, "lab": "lab1", "pause": True}, {"at": 500, "lab": "lab1", "pause": False}
    )
    result = run(scenario, policy)
    first = started_at(result, "first")
    assert soon_after(first, 500, policy)
    assert soon_after(started_at(result, "second"), (first or 0) + 100, policy)


@pytest.mark.parametrize(
    ("event", "words"),
    [
        ({"at": 1, "system": "s1.lab1", "reserve": "a", "loan": "b"}, "an event is one of"),
        ({"at": 1, "system": "s1.lab1", "condition": "broken", "for": 5}, "for goes with"),
        ({"at": 1, "lab": "nowhere", "pause": True}, "no lab 'nowhere'"),
        ({"at": 1, "system": "s1.lab1", "release": False}, "events[0].release"),
    ],
)
def test_bad_reservation_events_are_refused_naming_the_place(
    event: dict[str, Any], words: str
) -> None:
    with pytest.raises(InputError) as caught:
        parse_scenario(two_jobs(event), source="s.yaml")
    assert words in str(caught.value)
