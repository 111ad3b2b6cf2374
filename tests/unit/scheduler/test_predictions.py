"""The core with predictions (docs/scheduling.md § Predictions): plans, raises, guarantees."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labq.domain import requirements
from labq.domain.prediction import STEPS, raised
from labq.scheduler.core import Scheduler
from labq.scheduler.entries import (
    RecipeSubmission,
    SchedulerConfig,
    SetSubmission,
    SystemEntry,
    plan_of,
)
from labq.scheduler.profile import COULD_END_NOW

from .helpers import run, started_at, systems
from .test_backfill_properties import _simulate_watching

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ON = {"queue": {"backfill_on_predictions": True}, "aging": {"bump_after": None}}


def one(ident: str, width: int, duration: float, **keys: Any) -> dict[str, Any]:
    submit = keys.pop("submit_at", 0)
    recipes = [{"duration": duration}] * width
    return {"id": ident, "submit_at": submit, "recipe_sets": [{**keys, "recipes": recipes}]}


def lab(on: bool, narrow_predicted: float) -> dict[str, Any]:
    """Two systems: one runs 'first' to 100; 'wide' (both) holds the other; 'narrow' declares
    1000 s but is predicted ``narrow_predicted`` and really runs 50."""
    return {
        "config": ON if on else {**ON, "queue": {"backfill_on_predictions": False}},
        "systems": systems(2),
        "jobs": [
            one("first", 1, 100, max_time=100, predicted=100),
            one("wide", 2, 10, submit_at=1, priority="high", max_time=10),
            one("narrow", 1, 50, submit_at=2, max_time=1000, predicted=narrow_predicted),
        ],
    }


def test_a_set_predicted_to_end_before_the_reservation_backfills() -> None:
    on = run(lab(True, 60))
    assert started_at(on, "narrow") == 2  # predicted 62 <= wide's reserved start 100
    assert started_at(on, "wide") == 100
    off = run(lab(False, 60))
    assert started_at(off, "narrow") == 110  # declared 1002 > 100: it waits for wide


def test_a_set_predicted_past_the_reservation_does_not_backfill() -> None:
    assert started_at(run(lab(True, 200)), "narrow") == 110


def test_a_wrong_prediction_costs_the_holder_its_underrun_and_no_more() -> None:
    """narrow is predicted 20 s but runs 50; it still ends (52) before first does (100), so
    wide starts by its reservation: an underrun costs only when it outlasts the promise."""
    result = run(lab(True, 20))
    assert started_at(result, "narrow") == 2
    assert started_at(result, "wide") == 100  # narrow ended (52) before first (100)


def test_the_watchdog_still_kills_at_max_time_not_at_the_prediction() -> None:
    data = {
        "config": ON,
        "systems": systems(1),
        "jobs": [one("long", 1, 300, max_time=500, predicted=10)],
    }
    result = run(data)
    rows = [s for s in result.world.sets.values() if s.job == "long"]
    assert rows[0].finished_at == 300  # ran its 300 s: predictions never kill


def test_a_running_set_past_its_prediction_is_raised_in_the_profile() -> None:

    core = Scheduler(_config())
    core.add_system(SystemEntry("s1", "lab", facts={}, pools=frozenset()), 0)
    recipe = RecipeSubmission(1, requirements.ANY_SYSTEM)
    core.submit([SetSubmission(1, 1, (recipe,), max_time=7200, predicted=100)], 0)
    core.started(1, 0)
    assert core.declared_ends() == {"s1": 100}
    core.consistency_pass(130)  # any event after the planned end raises it
    assert core.declared_ends() == {"s1": 100 + 60}  # the first step above 130 s
    core.change_prediction(1, 5000, 140)
    assert core.declared_ends() == {"s1": 5000}
    forecast = core.forecasts(150)[1]
    assert (forecast.start, forecast.end) == (0, 5000)


def _config() -> SchedulerConfig:
    return SchedulerConfig(backfill_on_predictions=True, prediction_steps=STEPS)


def test_by_default_a_set_past_its_prediction_is_planned_on_its_max_time() -> None:
    core = Scheduler()
    core.add_system(SystemEntry("s1", "lab", facts={}, pools=frozenset()), 0)
    recipe = RecipeSubmission(1, requirements.ANY_SYSTEM)
    core.submit([SetSubmission(1, 1, (recipe,), max_time=7200, predicted=100)], 0)
    assert core.declared_ends() == {"s1": 100}
    core.consistency_pass(101)
    assert core.declared_ends() == {"s1": 7200}  # EASY++: straight to the declared time


# --- Hypothesis: the restated guarantees -------------------------------------------------


@st.composite
def scenarios(draw: Any, right: bool = False) -> dict[str, Any]:
    """Two labs; each set declares a time it keeps and is predicted right, short or long
    (``right``: every prediction comes true)."""
    systems_ = [
        {"fqdn": f"{lab_}-s{i}", "lab": lab_}
        for lab_ in ("lab1", "lab2")
        for i in range(draw(st.integers(1, 4)))
    ]
    jobs = []
    for j in range(draw(st.integers(1, 10))):
        duration = draw(st.integers(1, 300))
        declared = duration + draw(st.integers(0, 300))
        predicted = duration if right else draw(st.integers(1, declared))
        width = draw(st.integers(1, 4))
        jobs.append(
            one(
                f"j{j}",
                width,
                duration,
                submit_at=draw(st.integers(0, 400)),
                max_time=declared,
                predicted=predicted,
            )
        )
    return {"config": ON, "systems": systems_, "jobs": jobs}


def _recomputed(core: Scheduler, now: float) -> dict[str, float]:
    """Every running set's systems until its start plus its plan, raised as EASY++ says."""
    out: dict[str, float] = {}
    steps = core.config.prediction_steps
    for entry in core.sets.values():
        if entry.started and not entry.finished:
            assert entry.started_at is not None
            plan = plan_of(entry.predicted, entry.max_time, True)
            if plan is not None and entry.started_at + plan < now and plan != entry.max_time:
                plan = raised(plan, now - entry.started_at, entry.max_time, steps)
            end = COULD_END_NOW if plan is None else entry.started_at + plan
            for recipe in entry.recipes:
                assert recipe.system is not None
                out[recipe.system] = end
    return out


@SETTINGS
@given(scenarios())
def test_the_profile_holds_the_plans_raised_as_they_are_passed(raw: dict[str, Any]) -> None:
    def watch(core: Scheduler, now: float) -> None:
        assert core.declared_ends() == _recomputed(core, now)

    _simulate_watching(raw, watch)


@SETTINGS
@given(scenarios())
def test_a_top_holder_is_delayed_at_most_by_the_underruns_of_wrong_predictions(
    raw: dict[str, Any],
) -> None:
    """The top holder starts by the soonest reservation it had, plus the time the sets
    running in its lab meanwhile ran past their first plan (what wrong predictions cost).
    With every prediction right that is nothing: it starts by its reservation."""
    reserved: dict[tuple[int, str], tuple[float, float]] = {}  # -> (promise, when made)
    ended: dict[int, float] = {}

    def underrun(core: Scheduler, lab_: str, since: float, until: float) -> float:
        cost = 0.0
        for entry in core.sets.values():
            if entry.lab != lab_ or entry.started_at is None or entry.started_at > until:
                continue
            end = min(ended.get(entry.id, until), until)
            plan = plan_of(entry.predicted, entry.max_time, True)
            if plan is None or end < since:
                continue
            if end > entry.started_at + plan:  # it ran past its plan: the core raised it
                steps = core.config.prediction_steps
                grown = raised(plan, end - entry.started_at, entry.max_time, steps)
                if grown is not None:  # and planned on the raise, though it may end sooner
                    end = min(max(end, entry.started_at + grown), until)
            cost += max(0.0, end - max(since, entry.started_at + plan))
        return cost

    def watch(core: Scheduler, now: float) -> None:
        for entry in core.sets.values():
            if entry.finished and entry.id not in ended:
                ended[entry.id] = now
        for (set_id, lab_), (promised, since) in list(reserved.items()):
            entry = core.sets[set_id]
            if entry.started and entry.lab == lab_:
                del reserved[(set_id, lab_)]
                assert entry.started_at is not None
                slack = underrun(core, lab_, since, entry.started_at)
                assert entry.started_at <= promised + slack + 1e-6, (set_id, promised, slack)
        tops = set()
        for lab_, ids in core.holders.items():
            if ids:
                top = max((core.sets[h] for h in ids), key=core.rank_of)
                found = core.reservation_of(top)
                assert found is not None
                tops.add((top.id, lab_))
                old = reserved.get((top.id, lab_))
                if found.start < math.inf and (old is None or found.start < old[0]):
                    reserved[(top.id, lab_)] = (found.start, now)
        for key in set(reserved) - tops:
            del reserved[key]  # wound-wait or a move: it was promised nothing more

    _simulate_watching(raw, watch)


def test_the_forecast_log_sets_forecasts_against_starts() -> None:
    from labq.sim import runner
    from labq.sim.predicting import ForecastLog
    from labq.sim.scenario import parse_scenario

    world, ids = runner.build_world(parse_scenario(lab(True, 60), source="test"), {}, _core())
    world.forecasts = ForecastLog()
    for job, at in (("first", 0), ("wide", 1), ("narrow", 2)):
        world.at(at, runner.w.SUBMIT, ids[job])
    runner._loop(world, parse_scenario(lab(True, 60), source="test"))
    starts = {i: s.started_at for i, s in world.sets.items() if s.started_at is not None}
    assert world.forecasts.at_top[ids["wide"][0]] == 100  # its reservation, kept
    assert max(world.forecasts.errors(starts, "submission")) == 0  # predictions came true


def _core() -> Any:
    from labq.sim.policy import LabqPolicy

    return LabqPolicy(SchedulerConfig(aging_bump_after=None), runner_access())


def runner_access() -> Any:
    from labq.domain.model import AccessPolicy

    return AccessPolicy()


def test_forecasts_line_up_the_waiting_sets_behind_the_planned_ends() -> None:
    core = Scheduler(SchedulerConfig(aging_bump_after=None))
    core.add_system(SystemEntry("s1", "lab", facts={}, pools=frozenset()), 0)

    def submission(set_id: int, max_time: float, predicted: float | None) -> SetSubmission:
        recipe = RecipeSubmission(set_id, requirements.ANY_SYSTEM)
        return SetSubmission(set_id, set_id, (recipe,), max_time=max_time, predicted=predicted)

    core.submit([submission(1, 1000, 100)], 0)
    core.submit([submission(2, 500, 50), submission(3, 300, None)], 10)
    found = core.forecasts(20)
    assert (found[1].start, found[1].end) == (0, 100)  # running: its predicted end
    assert (found[2].start, found[2].end) == (100, 150)
    assert (found[3].start, found[3].end, found[3].prediction) == (150, 450, 300)


def _gang_behind_a_long_run(config: SchedulerConfig) -> Scheduler:
    """s1 runs a set declared to end at 1200; a gang of three holds s2 and s3 meanwhile."""
    core = Scheduler(config)
    for fqdn in ("s1", "s2", "s3"):
        core.add_system(SystemEntry(fqdn, "lab", facts={}, pools=frozenset()), 0)
    anything = requirements.ANY_SYSTEM
    core.submit(
        [SetSubmission(1, 1, (RecipeSubmission(1, anything, force="s1"),), max_time=1200)], 0
    )
    core.started(1, 0)
    gang = tuple(RecipeSubmission(10 + n, anything) for n in range(3))
    core.submit([SetSubmission(2, 2, gang)], 1)
    return core


def _started_on_s3(core: Scheduler, **timing: Any) -> bool:
    pinned = (RecipeSubmission(20, requirements.ANY_SYSTEM, force="s3"),)
    decisions = core.submit([SetSubmission(3, 3, pinned, **timing)], 2)
    return any(
        getattr(decision, "system", None) == "s3" and getattr(decision, "set", None) == 3
        for decision in decisions
    )


@pytest.mark.parametrize(
    ("config", "timing"),
    [
        (_config(), {"predicted": 2}),  # a reservation job: no max_time, 2 s seen before
        (SchedulerConfig(), {"max_time": 60}),
    ],
)
def test_a_set_that_keeps_its_system_after_it_ends_does_not_borrow_a_holders_system(
    config: SchedulerConfig, timing: dict[str, float]
) -> None:
    """A <reservesys> keeps the system for its owner once the set ends: lent s3 for a 2 s
    run, it would keep it 8 hours past the gang's start at 1200 (seen in CI: the UI's
    reservation of s3 took it from the gang holding it)."""
    assert _started_on_s3(_gang_behind_a_long_run(config), **timing)  # ends long before 1200
    kept = _gang_behind_a_long_run(config)
    assert not _started_on_s3(kept, **timing, kept=8 * 3600)
    assert kept.sets[2].held == {"s2", "s3"}  # the gang keeps what it holds


def test_what_a_set_may_keep_is_planned_as_busy_after_its_run() -> None:
    core = Scheduler(_config())
    core.add_system(SystemEntry("s1", "lab", facts={}, pools=frozenset()), 0)
    recipe = RecipeSubmission(1, requirements.ANY_SYSTEM)
    core.submit([SetSubmission(1, 1, (recipe,), max_time=7200, predicted=100, kept=3600)], 0)
    core.started(1, 0)
    assert core.declared_ends() == {"s1": 100 + 3600}
