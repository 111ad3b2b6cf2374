"""The seed's contention table cell for cell, the spv formula, aging (seed 004)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labq.domain.contention import LockNeeds, age_ticks, contention, spv, weight
from labq.domain.locks import DEFAULT_LEVELS, LockDecl, LockKind
from labq.domain.locktable import Grant
from labq.domain.priority import Priority
from labq.scheduler.entries import RecipeEntry, SchedulerConfig, SetEntry
from labq.scheduler.order import order_key, predictive_weight
from labq.scheduler.predictive import RunningLocks, declared, held

K = LockKind
NONE = LockDecl(K.NONE)
US, AS = LockDecl(K.UNKNOWN_SHARED), LockDecl(K.ALL_SHARED)
UX, AX = LockDecl(K.UNKNOWN_EXCLUSIVE), LockDecl(K.ALL_EXCLUSIVE)
I_SHARED = LockDecl(K.SHARED, frozenset({"i"}))
I_EXCL = LockDecl(K.EXCLUSIVE, frozenset({"i"}))
J_SHARED_SAME = LockDecl(K.SHARED, frozenset({"i", "x"}))  # overlaps {"i"}
J_SHARED_OTHER = LockDecl(K.SHARED, frozenset({"j"}))
J_EXCL_SAME = LockDecl(K.EXCLUSIVE, frozenset({"x", "i"}))
J_EXCL_OTHER = LockDecl(K.EXCLUSIVE, frozenset({"j"}))

# The seed's table, row (pending) by row, columns in the seed's order:
# None, Shared(j), UnknownShared, AllShared, Exclusive(j), UnknownExclusive, AllExclusive.
# Named cells are given as (j = i, j != i).
Cell = float | tuple[float, float]
TABLE: dict[str, tuple[LockDecl, list[Cell]]] = {
    "None": (NONE, [0, (0, 0), 0, 0, (0, 0), 0, 0]),
    "Shared(i)": (I_SHARED, [0.3, (0, 0), 0, 0, (3, 0.3), 1.5, 3]),
    "UnknownShared": (US, [0.3, (0.3, 0.3), 0.3, 0.3, (1.5, 1.5), 1.5, 3]),
    "AllShared": (AS, [0.3, (0.3, 0.3), 0.3, 0.3, (3, 3), 3, 3]),
    "Exclusive(i)": (I_EXCL, [0.5, (3, 0.5), 1.5, 3, (3, 0.5), 1.5, 3]),
    "UnknownExclusive": (UX, [0.5, (1.5, 1.5), 1.5, 3, (1.5, 1.5), 1.5, 3]),
    "AllExclusive": (AX, [0.5, (3, 3), 3, 3, (3, 3), 3, 3]),
}
COLUMNS = [NONE, (J_SHARED_SAME, J_SHARED_OTHER), US, AS, (J_EXCL_SAME, J_EXCL_OTHER), UX, AX]


def _cells() -> list[tuple[str, LockDecl, LockDecl, float]]:
    out = []
    for row, (pending, values) in TABLE.items():
        for column, value in zip(COLUMNS, values, strict=True):
            if isinstance(column, tuple):
                assert isinstance(value, tuple)
                out.append((row, pending, column[0], float(value[0])))
                out.append((row, pending, column[1], float(value[1])))
            else:
                assert not isinstance(value, tuple)
                out.append((row, pending, column, float(value)))
    return out


@pytest.mark.parametrize(("row", "pending", "running", "expected"), _cells())
def test_every_cell_of_the_seed_table(
    row: str, pending: LockDecl, running: LockDecl, expected: float
) -> None:
    assert contention(pending, running) == expected, f"{row} against {running}"


def test_the_table_has_every_cell() -> None:
    assert len(_cells()) == 7 * 7 + 7 * 2  # the two named columns twice: same and other names


def test_named_pairs_clash_only_when_names_overlap() -> None:
    a = LockDecl(K.EXCLUSIVE, frozenset({"nfs1", "nfs2"}))
    assert contention(a, LockDecl(K.SHARED, frozenset({"nfs2"}))) == 3
    assert contention(a, LockDecl(K.SHARED, frozenset({"nfs3"}))) == 0.5
    shared = LockDecl(K.SHARED, frozenset({"nfs1"}))
    assert contention(shared, LockDecl(K.SHARED, frozenset({"nfs1"}))) == 0  # shared + shared


def needs(**levels: LockDecl) -> LockNeeds:
    return LockNeeds(tuple(sorted(levels.items())))


def test_spv_sums_the_worst_cell_of_each_level_plus_base() -> None:
    pending = needs(storage=I_EXCL, network=US)
    running = [needs(storage=J_SHARED_OTHER), needs(storage=J_EXCL_SAME), needs(network=UX)]
    # storage: max(0.5, 3, 0.5 for None) = 3; network: max(0.3, 0.3, 1.5) = 1.5
    assert spv(pending, running, DEFAULT_LEVELS, base=1.0) == pytest.approx(1 + 3 + 1.5)
    assert spv(pending, [], DEFAULT_LEVELS, base=2.0) == 2.0  # nothing runs: no contention


def test_a_pending_set_with_the_whole_lab_scores_base_plus_15() -> None:
    bgl = LockNeeds(whole_lab=True)
    assert spv(bgl, [], DEFAULT_LEVELS, base=1.0) == 16.0
    assert spv(bgl, [needs(storage=AX)], DEFAULT_LEVELS, base=1.0) == 16.0


def test_a_running_set_with_the_whole_lab_counts_as_all_exclusive_everywhere() -> None:
    pending = needs(storage=I_SHARED, pool=US)
    bgl = LockNeeds(whole_lab=True)
    assert spv(pending, [bgl], DEFAULT_LEVELS, base=1.0) == 1 + 3 + 3
    running = RunningLocks(DEFAULT_LEVELS)
    running.put(7, declared(bgl, DEFAULT_LEVELS))
    assert running.spv(pending, 1.0) == 7.0


def test_held_locks_replace_the_declaration() -> None:
    running = RunningLocks(DEFAULT_LEVELS)
    running.put(1, declared(needs(storage=UX), DEFAULT_LEVELS))
    pending = needs(storage=I_SHARED)
    assert running.spv(pending, 1.0) == 2.5  # Shared(i) against UnknownExclusive
    running.put(1, held([Grant("storage", "j", exclusive=True)], DEFAULT_LEVELS))
    assert running.spv(pending, 1.0) == pytest.approx(1.3)  # the names are known: no clash
    running.put(1, held([Grant("storage", "i", exclusive=True)], DEFAULT_LEVELS))
    assert running.spv(pending, 1.0) == 4.0
    running.put(1, held([Grant("whole_lab", "lab1", exclusive=True)], DEFAULT_LEVELS))
    assert running.spv(pending, 1.0) == 4.0  # AllExclusive
    running.remove(1)
    assert running.spv(pending, 1.0) == 1.0


@pytest.mark.parametrize(("age", "expected"), [(0, 6.0), (15, 3.0), (30, 0.0), (45, 0.0)])
def test_aging_at_zero_half_and_k_ticks(age: int, expected: float) -> None:
    assert weight(6.0, age, 30) == expected


def test_age_is_quantised_to_ticks() -> None:
    assert age_ticks(59.9, 30.0) == 1
    assert age_ticks(60.0, 30.0) == 2
    config = SchedulerConfig(tick=30.0, aging_ticks=30)
    entry = _set(1, submitted=0.0, spv=4.0)
    assert predictive_weight(entry, 450.0, config) == 2.0  # 15 ticks: half of spv
    assert predictive_weight(entry, 900.0, config) == 0.0
    off = SchedulerConfig(predictive=False)
    assert predictive_weight(entry, 0.0, off) == 0.0


# --- properties -----------------------------------------------------------------------

DECLS = st.one_of(
    st.sampled_from([NONE, US, AS, UX, AX]),
    st.builds(
        LockDecl,
        st.sampled_from([K.SHARED, K.EXCLUSIVE]),
        st.frozensets(st.sampled_from("abcd"), min_size=1, max_size=3),
    ),
)
NEEDS = st.builds(
    lambda levels, bgl: LockNeeds(
        tuple(sorted((lvl, d) for lvl, d in levels.items() if d.kind is not K.NONE)), bgl
    ),
    st.dictionaries(st.sampled_from(DEFAULT_LEVELS), DECLS, max_size=3),
    st.booleans(),
)


@given(pending=NEEDS, running=st.lists(NEEDS, max_size=6), base=st.floats(0, 10))
def test_the_aggregate_agrees_with_the_formula(
    pending: LockNeeds, running: list[LockNeeds], base: float
) -> None:
    aggregate = RunningLocks(DEFAULT_LEVELS)
    for set_id, other in enumerate(running):
        aggregate.put(set_id, declared(other, DEFAULT_LEVELS))
    assert aggregate.spv(pending, base) == pytest.approx(
        spv(pending, running, DEFAULT_LEVELS, base)
    )
    for set_id in range(len(running)):
        aggregate.remove(set_id)
    assert aggregate.spv(pending, base) == pytest.approx(spv(pending, [], DEFAULT_LEVELS, base))


@given(
    spv_value=st.floats(0, 100),
    age=st.integers(0, 10_000),
    k=st.integers(0, 200),
)
def test_weights_never_go_below_zero(spv_value: float, age: int, k: int) -> None:
    assert weight(spv_value, age, k) >= 0.0


def _set(set_id: int, *, submitted: float, spv: float) -> SetEntry:
    recipe = RecipeEntry(id=set_id, set_id=set_id, index=0, klass="any")
    entry = SetEntry(
        id=set_id, job=set_id, priority=Priority.NORMAL, submitted=submitted, recipes=[recipe]
    )
    entry.spv = spv
    return entry


@given(
    submitted=st.floats(0, 10_000),
    spv_a=st.floats(0, 20),
    spv_b=st.floats(0, 20),
    first_look=st.floats(0, 20_000),
    later=st.floats(0, 20_000),
)
def test_aging_never_reorders_two_sets_of_equal_age(
    submitted: float, spv_a: float, spv_b: float, first_look: float, later: float
) -> None:
    config = SchedulerConfig(aging_bump_after=None)
    a, b = _set(1, submitted=submitted, spv=spv_a), _set(2, submitted=submitted, spv=spv_b)
    early = submitted + first_look
    late = early + later

    def order(now: float) -> bool:
        return order_key(a, Priority.URGENT, now, config) > order_key(
            b, Priority.URGENT, now, config
        )

    def tied(now: float) -> bool:
        return predictive_weight(a, now, config) == predictive_weight(b, now, config)

    # equal age: the order never flips, unless both weights reached 0 (then FIFO/id decides)
    if not tied(late):
        assert order(early) == order(late)


@given(
    spv_value=st.floats(0, 20),
    older=st.floats(0, 10_000),
    gap=st.floats(0, 10_000),
    now=st.floats(0, 40_000),
)
def test_aging_keeps_an_older_set_of_equal_spv_ahead(
    spv_value: float, older: float, gap: float, now: float
) -> None:
    config = SchedulerConfig(aging_bump_after=None)
    old, young = (
        _set(1, submitted=older, spv=spv_value),
        _set(2, submitted=older + gap, spv=spv_value),
    )
    at = older + gap + now
    assert order_key(old, Priority.URGENT, at, config) > order_key(
        young, Priority.URGENT, at, config
    )


def test_a_level_a_running_set_holds_nothing_on_yet_counts_by_its_declaration() -> None:
    running = RunningLocks(DEFAULT_LEVELS)
    declared_needs = needs(storage=I_SHARED, network=UX)
    grants = [Grant("storage", "i")]
    running.put(1, held(grants, DEFAULT_LEVELS, declared_needs))
    pending = needs(network=J_SHARED_OTHER)
    assert running.spv(pending, 1.0) == 2.5  # its unknown network lock is still to come
    running.put(
        1, held([*grants, Grant("network", "k", exclusive=True)], DEFAULT_LEVELS, declared_needs)
    )
    assert running.spv(pending, 1.0) == pytest.approx(1.3)
