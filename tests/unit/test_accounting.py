"""Accounting adds up what the usage history says, whatever way the rows are cut."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labq.domain.accounting import NO_POOL, Busy, Ended, Served, Started, report

OWNERS = ("alice", "bob")
GROUPS = ("qe", None)
SYSTEMS = {"a.lab1": "lab1", "b.lab1": "lab1", "c.lab2": "lab2"}
POOLS = {"a.lab1": frozenset({"perf", "fast"}), "b.lab1": frozenset({"perf"})}


@st.composite
def histories(draw: st.DrawFn) -> tuple[dict[int, Served], list[Busy], list[Ended], list[Started]]:
    count = draw(st.integers(1, 8))
    served = {}
    for recipe in range(1, count + 1):
        system = draw(st.sampled_from(sorted(SYSTEMS)))
        served[recipe] = Served(
            recipe,
            job=draw(st.integers(1, 3)),
            owner=draw(st.sampled_from(OWNERS)),
            group=draw(st.sampled_from(GROUPS)),
            system=system,
            lab=SYSTEMS[system],
        )
    busy = [
        Busy(r, start, start + length)
        for r in served
        for start, length in draw(
            st.lists(st.tuples(st.floats(0, 1e5), st.floats(0, 1e4)), max_size=3)
        )
    ]
    ended = [Ended(r, draw(st.booleans())) for r in served if draw(st.booleans())]
    started = [Started((r,), draw(st.floats(0, 1e4))) for r in served if draw(st.booleans())]
    return served, busy, ended, started


@given(histories())
def test_every_cut_adds_up_to_the_same_hours_and_recipes(
    found: tuple[dict[int, Served], list[Busy], list[Ended], list[Started]],
) -> None:
    served, busy, ended, started = found
    total = sum(b.end - b.start for b in busy) / 3600
    for by in ("user", "group", "lab"):
        rows = report(by, served, busy, ended, started, POOLS)  # type: ignore[arg-type]
        assert sum(r.system_hours for r in rows) == pytest.approx(total)
        assert sum(r.recipes for r in rows) == len(ended)
        assert sum(r.passed for r in rows) == sum(e.passed for e in ended)
        for row in rows:
            assert row.pass_rate is None or 0.0 <= row.pass_rate <= 1.0
    # pools overlap: a system in two pools counts in both, one in none under (no pool)
    pools = {r.key: r for r in report("pool", served, busy, ended, started, POOLS)}
    for key, row in pools.items():
        members = [f for f, p in POOLS.items() if key in p] if key != NO_POOL else ["c.lab2"]
        expected = sum(b.end - b.start for b in busy if served[b.recipe].system in members)
        assert row.system_hours == pytest.approx(expected / 3600)


def test_a_sets_wait_counts_once_per_row_and_unknown_recipes_nowhere() -> None:
    served = {
        1: Served(1, 1, "alice", "qe", "a.lab1", "lab1"),
        2: Served(2, 1, "alice", "qe", "b.lab1", "lab1"),
    }
    started = [Started((1, 2), 60.0), Started((3,), 9999.0)]
    (row,) = report("group", served, [Busy(3, 0, 3600)], [], started, POOLS)
    assert row.key == "qe"
    assert row.mean_wait_s == 60.0
    assert row.system_hours == 0.0
