"""Running limits, rate-limit buckets, paused labs, blocks and the predictive order, on the core."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from labq.domain import requirements
from labq.domain.contention import LockNeeds
from labq.domain.locks import parse_locks
from labq.domain.locktable import Grant, declared_grants
from labq.domain.priority import Priority
from labq.domain.states import RecipeState
from labq.scheduler import decisions as d
from labq.scheduler.core import Scheduler
from labq.scheduler.entries import (
    Eligibility,
    RecipeSubmission,
    SchedulerConfig,
    SetSubmission,
    SystemEntry,
)


def core(systems: int = 4, labs: Sequence[str] = ("lab1",), **config: object) -> Scheduler:
    scheduler = Scheduler(SchedulerConfig(aging_bump_after=None, **config))  # type: ignore[arg-type]
    for lab in labs:
        for i in range(systems):
            scheduler.add_system(SystemEntry(f"s{i}.{lab}", lab, {}, frozenset()), 0.0)
    return scheduler


def one(
    set_id: int,
    *,
    at: float = 0.0,
    width: int = 1,
    locks: object = None,
    blocked: str | None = None,
    buckets: tuple[tuple[str, int], ...] = (),
    priority: Priority = Priority.NORMAL,
) -> SetSubmission:
    recipes = tuple(
        RecipeSubmission(set_id * 100 + i, requirements.ANY_SYSTEM) for i in range(width)
    )
    return SetSubmission(
        set_id,
        set_id,
        recipes,
        priority=priority,
        submitted=at,
        locks=LockNeeds.of(parse_locks(locks)),
        blocked=blocked,
        buckets=buckets,
    )


def starts(decisions: Sequence[d.Decision]) -> list[int]:
    return [x.set for x in decisions if isinstance(x, d.Start)]


def running(scheduler: Scheduler) -> set[int]:
    return {s.id for s in scheduler.sets.values() if s.started and not s.finished}


def test_the_global_running_limit_holds_and_the_next_starts_when_one_ends() -> None:
    s = core(systems=4, running_limit=2)
    out = s.submit([one(i, at=i) for i in range(1, 5)], 10.0)
    assert starts(out) == [1, 2]
    assert s.waits_for(s.sets[3]) == "a running slot (2 of 2 sets running)"
    out = s.finish(1, {100: RecipeState.COMPLETED}, 20.0)
    assert starts(out) == [3]
    assert running(s) == {2, 3}


def test_a_lab_running_limit_leaves_other_labs_alone() -> None:
    s = core(systems=3, labs=("lab1", "lab2"), lab_running_limits=(("lab1", 1),))
    s.pause_lab("lab2", 0.0)
    out = s.submit([one(i, at=i) for i in range(1, 4)], 10.0)
    assert starts(out) == [1]  # lab1 takes one; lab2 is paused
    assert s.waits_for(s.sets[2]) == (
        "a running slot in lab1 (1 of 1 sets running); the queue of lab2 is paused"
    )
    out = s.resume_lab("lab2", 11.0)
    assert starts(out) == [2, 3]
    assert {s.sets[2].lab, s.sets[3].lab} == {"lab2"}


def test_a_full_bucket_throttles_its_sets_until_one_ends() -> None:
    s = core(systems=4)
    nightly = (("reason:nightly", 1),)
    out = s.submit([one(1, buckets=nightly), one(2, at=1, buckets=nightly), one(3, at=2)], 5.0)
    assert starts(out) == [1, 3]
    assert s.sets[2].throttle == "rate limit reason:nightly: 1 of 1 running"
    out = s.finish(1, {100: RecipeState.COMPLETED}, 6.0)
    assert starts(out) == [2]


def test_a_blocked_set_takes_nothing_until_unblocked() -> None:
    s = core(systems=1)
    out = s.submit([one(1, blocked="waits for job 9"), one(2, at=1)], 5.0)
    assert starts(out) == [2]
    assert s.waits_for(s.sets[1]) == "waits for job 9"
    s.finish(2, {200: RecipeState.COMPLETED}, 6.0)
    assert not running(s)  # the free system went idle: set 1 is still blocked
    out = s.change_eligibility({1: Eligibility()}, 7.0)
    assert starts(out) == [1]


def test_blocking_a_holder_gives_its_systems_back() -> None:
    s = core(systems=2)
    s.submit([one(1, width=1)], 0.0)  # runs on one system
    s.submit([one(2, at=1, width=2)], 1.0)  # holds the other
    assert s.sets[2].lab == "lab1"
    assert s.sets[2].placed()
    out = s.change_eligibility({2: Eligibility(blocked="paused by filter 1")}, 2.0)
    assert any(isinstance(x, d.Release) for x in out)
    assert not s.sets[2].placed()
    assert s.sets[2].lab is None


def test_the_predictive_weight_puts_the_uncontended_set_first() -> None:
    def run(predictive: bool) -> list[int]:
        s = core(systems=2, running_limit=2, predictive=predictive)
        nfs = {"storage": {"exclusive": ["nfs1"]}}
        s.submit([one(1, locks=nfs), one(4)], 0.0)  # both run; 1 holds nfs1 by declaration
        s.submit([one(2, at=1, locks=nfs), one(3, at=2)], 2.0)
        assert s.sets[2].spv == 4.0
        assert s.sets[3].spv == 1.0
        return starts(s.finish(4, {400: RecipeState.COMPLETED}, 3.0))

    assert run(predictive=True) == [3]  # the later but uncontended set goes first
    assert run(predictive=False) == [2]  # first come, first served


def test_spv_follows_what_running_sets_really_hold() -> None:
    s = core(systems=2, running_limit=1)
    s.submit([one(1, locks={"storage": {"exclusive": "unknown"}})], 0.0)
    s.submit([one(2, at=1, locks={"storage": {"shared": ["nfs1"]}})], 1.0)
    assert s.sets[2].spv == 2.5  # Shared(i) against UnknownExclusive
    s.locks_held(1, [Grant("storage", "nfs2", exclusive=True)], 2.0)
    assert s.sets[2].spv == 1.3
    s.locks_held(1, [Grant("storage", "nfs1", exclusive=True)], 3.0)
    assert s.sets[2].spv == 4.0
    s.finish(1, {100: RecipeState.COMPLETED}, 4.0)
    assert s.sets[2].started


def test_weights_age_away_so_contended_sets_are_not_starved() -> None:
    def first_when_a_slot_opens(at: float) -> list[int]:
        s = core(systems=2, running_limit=2, tick=10.0, aging_ticks=3)
        unknown = {"storage": {"exclusive": "unknown"}, "network": {"exclusive": "unknown"}}
        named = {"storage": {"exclusive": ["nfs1"]}, "network": {"exclusive": ["vlan7"]}}
        s.submit([one(1, locks=unknown), one(4)], 0.0)
        s.submit([one(2, at=0, locks=named)], 0.0)  # may wait (1.5 a level), not surely
        s.submit([one(3, at=25)], 25.0)
        assert s.sets[2].spv == 4.0
        return starts(s.finish(4, {400: RecipeState.COMPLETED}, at))

    # at 26 s set 2 is 2 ticks old: weight 4 * (1 - 2/3) = 1.33 > set 3's 1
    assert first_when_a_slot_opens(26.0) == [3]
    # at 30 s set 2 is 3 ticks old: weight 0, and it is older
    assert first_when_a_slot_opens(30.0) == [2]


NFS_X = {"storage": {"exclusive": ["nfs1"]}}


def test_a_set_that_would_wait_for_a_held_lock_stays_queued_and_its_slot_goes_to_work() -> None:
    # issue 11 item 2: a running limit of 2; set 1 holds nfs1; queued [needs nfs1, needs nothing]
    s = core(systems=3, running_limit=2, tick=10.0, aging_ticks=3)
    s.submit([one(1, locks=NFS_X), one(4)], 0.0)
    s.submit([one(2, locks=NFS_X)], 0.0)
    s.submit([one(3, at=25)], 25.0)
    # at 30 s set 2's weight has aged to 0 and it is older: the order alone would start it
    assert starts(s.finish(4, {400: RecipeState.COMPLETED}, 30.0)) == [3]
    assert s.waits_for(s.sets[2]) == "waits for lock storage:nfs1 held by set 1"
    assert starts(s.finish(1, {100: RecipeState.COMPLETED}, 40.0)) == [2]


def test_a_kept_set_starts_on_an_idle_system_when_the_lock_is_let_go() -> None:
    s = core(systems=2)
    s.submit([one(1, locks={"storage": {"exclusive": "unknown"}})], 0.0)
    s.locks_held(1, [Grant("storage", "nfs1", exclusive=True)], 1.0)
    assert starts(s.submit([one(2, at=2, locks=NFS_X)], 2.0)) == []
    assert s.waits_for(s.sets[2]) == "waits for lock storage:nfs1 held by set 1"
    # set 1 lets go of nfs1 and runs on: set 2 takes the idle system
    assert starts(s.locks_held(1, [], 3.0)) == [2]


def test_a_whole_lab_set_is_kept_until_its_lab_is_empty_and_later_sets_wait_behind_it() -> None:
    s = core(systems=3)
    s.submit([one(1)], 0.0)
    assert starts(s.submit([one(2, at=1, locks={"whole_lab": True})], 1.0)) == []
    assert s.waits_for(s.sets[2]) == "waits for lock whole_lab:lab1 held by set 1"
    assert starts(s.submit([one(3, at=2)], 2.0)) == []  # it would take the lab before set 2
    assert s.waits_for(s.sets[3]) == (
        "waits for lock whole_lab:lab1 after set 2, which waits for it first"
    )
    assert starts(s.finish(1, {100: RecipeState.COMPLETED}, 3.0)) == [2]
    assert starts(s.finish(2, {200: RecipeState.COMPLETED}, 4.0)) == [3]


def test_a_set_that_would_take_a_free_exclusive_lock_goes_first() -> None:
    # exclusive locks are where sets queue: one lying idle while its users wait ends later
    s = core(systems=3, running_limit=1)
    s.submit([one(1)], 0.0)
    s.submit([one(2, at=1), one(3, at=2, locks=NFS_X)], 2.0)
    assert (s.sets[2].spv, s.sets[3].spv) == (1.0, 0.0)  # the seed's cell would be 0.5
    assert starts(s.finish(1, {100: RecipeState.COMPLETED}, 3.0)) == [3]
    assert s.sets[2].spv == 1.0


def test_labq_fifo_keeps_nobody_back() -> None:
    s = core(systems=2, predictive=False)
    s.submit([one(1, locks=NFS_X)], 0.0)
    assert starts(s.submit([one(2, at=1, locks=NFS_X)], 1.0)) == [2]  # to wait in its slot


LOCKS = st.sampled_from(
    [
        None,
        NFS_X,
        {"storage": {"shared": ["nfs1"]}},
        {"storage": {"exclusive": ["nfs2"]}},
        {"storage": {"shared": "unknown"}},
        {"storage": {"exclusive": "all"}},
        {"whole_lab": True},
    ]
)


@settings(max_examples=80, deadline=None)
@given(
    limit=st.integers(1, 3),
    locks=st.lists(LOCKS, min_size=1, max_size=10),
    later=st.lists(LOCKS, max_size=6),
    order=st.randoms(use_true_random=False),
)
def test_kept_sets_all_start_and_none_starts_into_a_held_lock(
    limit: int, locks: list[object], later: list[object], order: object
) -> None:
    s = core(systems=4, running_limit=limit)
    s.submit([one(i + 1, at=i, locks=lk) for i, lk in enumerate(locks)], 10.0)
    pending = [one(len(locks) + i + 1, at=20 + i, locks=lk) for i, lk in enumerate(later)]
    now = 10.0
    while running(s):
        now += 1
        if pending and order.random() < 0.5:  # type: ignore[attr-defined]
            out = s.submit([pending.pop(0)], now)
        else:
            ids = sorted(running(s))
            out = s.finish(ids[order.randrange(len(ids))], {}, now)  # type: ignore[attr-defined]
        for started in starts(out):  # it takes its declared locks at once
            entry = s.sets[started]
            assert entry.lab is not None
            mine = declared_grants(entry.locks, entry.lab)
            for other in running(s) - {started}:
                theirs = declared_grants(s.sets[other].locks, entry.lab)
                assert not any(a.conflicts(b) for a in mine for b in theirs)
        if not running(s) and pending:
            s.submit([pending.pop(0)], now)
    assert all(e.finished for e in s.sets.values())  # every set ran in the end


@settings(max_examples=60, deadline=None)
@given(
    limit=st.integers(1, 3),
    widths=st.lists(st.integers(1, 3), min_size=1, max_size=8),
    order=st.randoms(use_true_random=False),
)
def test_the_running_limit_is_never_exceeded(limit: int, widths: list[int], order: object) -> None:
    s = core(systems=5, running_limit=limit)
    s.submit([one(i + 1, at=i, width=w) for i, w in enumerate(widths)], 10.0)
    now = 10.0
    while running(s):
        assert len(running(s)) <= limit
        ids = sorted(running(s))
        victim = ids[order.randrange(len(ids))]  # type: ignore[attr-defined]
        now += 1
        s.finish(victim, {}, now)
    assert len(running(s)) <= limit
    assert all(e.finished for e in s.sets.values())  # every set ran in the end


def test_a_set_placed_nowhere_says_why_when_every_lab_is_closed_to_it() -> None:
    s = core(systems=1, labs=("lab1", "lab2"), lab_running_limits=(("lab1", 1),))
    s.pause_lab("lab2", 0.0)
    s.submit([one(1), one(2, at=1)], 1.0)
    assert s.waits_for(s.sets[2]) == (
        "a running slot in lab1 (1 of 1 sets running); the queue of lab2 is paused"
    )
    s.resume_lab("lab3", 2.0)  # a lab the core has no system in: nothing to do
    assert s.resume_lab("lab2", 3.0)  # set 2 starts in lab2
    assert s.sets[2].started
