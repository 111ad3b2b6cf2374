"""Backfill's promises (Hypothesis): reservations are never pushed back, the profile is exact."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labq.scheduler.core import Scheduler
from labq.scheduler.freshness import Freshness
from labq.scheduler.profile import COULD_END_NOW, Profile
from labq.scheduler.reservation import reserve
from labq.sim import runner
from labq.sim.scenario import parse_scenario
from labq.sim.world import World

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KINDS = ["x", "y"]


@st.composite
def labs(draw: Any) -> tuple[Profile, dict[str, frozenset[str]], set[str], dict[str, int], float]:
    """A lab: some systems busy until a declared end, a holder's demands and pools."""
    now = float(draw(st.integers(0, 100)))
    names = [f"s{i}" for i in range(draw(st.integers(1, 10)))]
    kind = {n: draw(st.sampled_from(KINDS)) for n in names}
    profile = Profile(Freshness())
    for name in names:
        end = draw(st.one_of(st.none(), st.just(-1.0), st.integers(0, 500).map(float)))
        if end is not None:
            profile.occupy("lab", [name], None if end < 0 else end)
    blocked = {n for n in names if not profile.busy(n) and draw(st.integers(0, 4)) == 0}
    classes = draw(st.sampled_from([["x"], ["any"], ["x", "y"], ["any", "x"]]))
    pools = {k: frozenset(n for n in names if k == "any" or kind[n] == k) for k in classes}
    demands = {k: draw(st.integers(1, 3)) for k in classes}
    return profile, pools, blocked, demands, now


@SETTINGS
@given(labs(), st.data())
def test_a_backfill_the_reservation_allows_never_pushes_it_back(lab, data):
    profile, pools, blocked, demands, now = lab
    before = reserve(demands, pools, blocked, profile, "lab", now)
    free = sorted({f for pool in pools.values() for f in pool} - blocked - set(profile.snapshot()))
    taken = set(data.draw(st.lists(st.sampled_from(free), unique=True) if free else st.just([])))
    end = data.draw(st.one_of(st.just(math.inf), st.integers(int(now), 600).map(float)))
    if before.delays(end, taken):
        return
    profile.occupy("lab", taken, None if end == math.inf else end)
    after = reserve(demands, pools, blocked, profile, "lab", now)
    assert after.start <= before.start


def _recomputed(core: Scheduler) -> dict[str, float]:
    """The profile worked out from scratch: every running set's systems until its end."""
    out: dict[str, float] = {}
    for entry in core.sets.values():
        if entry.started and not entry.finished:
            assert entry.started_at is not None
            end = COULD_END_NOW if entry.max_time is None else entry.started_at + entry.max_time
            for recipe in entry.recipes:
                assert recipe.system is not None
                out[recipe.system] = end
    return out


@st.composite
def scenarios(draw: Any, exact: bool = False) -> dict[str, Any]:
    """Two labs, mixed kinds and widths; ``exact``: every set declares a time it keeps."""
    systems = [
        {"fqdn": f"{lab}-s{i}", "lab": lab, "attrs": {"kind": draw(st.sampled_from(KINDS))}}
        for lab in ("lab1", "lab2")
        for i in range(draw(st.integers(1, 4)))
    ]
    hosts = st.sampled_from([{}, {"kind": "x"}, {"kind": "y"}])
    jobs = []
    for j in range(draw(st.integers(1, 10))):
        duration = draw(st.integers(1, 300))
        declared = (
            duration + draw(st.integers(0, 100))
            if exact
            else draw(st.sampled_from([None, 100, 250]))
        )
        recipes = [
            {"host": draw(hosts), "duration": duration} for _ in range(draw(st.integers(1, 4)))
        ]
        jobs.append(
            {
                "id": f"j{j}",
                "submit_at": draw(st.integers(0, 400)),
                "recipe_sets": [{"max_time": declared, "recipes": recipes}],
            }
        )
    events = []
    if not exact:
        for _ in range(draw(st.integers(0, 3))):
            events.append(
                {
                    "at": draw(st.integers(0, 600)),
                    "system": draw(st.sampled_from(systems))["fqdn"],
                    "condition": draw(st.sampled_from(["automated", "broken", "manual"])),
                }
            )
    holds = draw(st.integers(1, 3))
    return {
        "config": {"aging": {"bump_after": None}, "holds": {"per_lab": holds}},
        "systems": systems,
        "jobs": jobs,
        "events": events,
    }


def _simulate_watching(raw: dict[str, Any], watch: Any) -> World:
    """Simulate, calling ``watch(core, now)`` after every event the core handled."""
    original = World.apply

    def apply(self: World, decisions: Any) -> None:
        original(self, decisions)
        watch(self.policy, self.now)

    World.apply = apply  # type: ignore[method-assign]
    try:
        return runner.simulate(parse_scenario(raw, source="hypothesis"), {}, "labq").world
    finally:
        World.apply = original  # type: ignore[method-assign]


@SETTINGS
@given(scenarios())
def test_the_incremental_profile_equals_a_recomputed_one_after_every_event(raw):
    def watch(core: Scheduler, now: float) -> None:
        assert core.declared_ends() == _recomputed(core)

    _simulate_watching(raw, watch)


@SETTINGS
@given(scenarios(exact=True))
def test_a_top_holder_starts_by_its_reserved_start(raw):
    """With one priority and declared times that hold, no lower-ranked set pushes a top
    holder back: it starts by the soonest reservation it had in that lab. (A higher-ranked
    set may take its systems: wound-wait; its promise then starts over.)"""
    reserved: dict[tuple[int, str], float] = {}  # (top holder, lab) -> soonest reservation
    seen: set[int] = set()  # started sets already looked at

    def watch(core: Scheduler, now: float) -> None:
        for entry in core.sets.values():
            if entry.started and entry.id not in seen:
                seen.add(entry.id)
                for set_id, lab in list(reserved):
                    promised = reserved.pop((set_id, lab))
                    if set_id == entry.id:
                        assert entry.started_at is not None
                        assert entry.started_at <= promised, (set_id, entry.started_at)
                    elif lab != entry.lab or core.rank_of(entry) < core.rank_of(core.sets[set_id]):
                        reserved[(set_id, lab)] = promised  # a backfill: the promise holds
        tops = set()
        for lab, ids in core.holders.items():
            if ids:
                top = max((core.sets[h] for h in ids), key=core.rank_of)
                found = core.reservation_of(top)
                assert found is not None
                tops.add((top.id, lab))
                reserved[(top.id, lab)] = min(reserved.get((top.id, lab), math.inf), found.start)
        for key in set(reserved) - tops:
            del reserved[key]  # no longer the top holder there: it was promised nothing more

    _simulate_watching(raw, watch)
