"""The lock service's storage: all-or-nothing grants, FIFO waiters, release, stale waiters."""

from __future__ import annotations

import pytest

from labq.domain.locktable import Grant
from labq.domain.states import RecipeState
from labq.errors import ConflictError
from labq.store import Repository

from .conftest import at
from .test_supervisors import scheduled_set

NFS_X = Grant("storage", "nfs1", exclusive=True)
NFS_S = Grant("storage", "nfs1")
NET = Grant("network", "vlan7", exclusive=True)


def running(repo: Repository, system: str) -> int:
    set_id = scheduled_set(repo, system)
    repo.supervisors.start_recipe_set(set_id, lab="lab1", now=at(3))
    return set_id


def test_locks_are_granted_all_together_or_not_at_all(seeded: Repository) -> None:
    a, b = running(seeded, "s1.lab"), running(seeded, "s2.lab")
    assert seeded.locks.acquire_locks(a, [NFS_X], now=at(10)).granted
    outcome = seeded.locks.acquire_locks(b, [NET, NFS_S], now=at(11), wait=False)
    assert not outcome.granted
    assert [blocker.owner for blocker in outcome.blockers] == [a]
    assert seeded.locks.held_locks() == {a: (NFS_X,)}  # b took nothing: not even the free vlan7


def test_waiters_are_served_first_come_when_locks_are_released(seeded: Repository) -> None:
    a, b, c = (running(seeded, f"s{i}.lab") for i in (1, 2, 3))
    assert seeded.locks.acquire_locks(a, [NFS_X], now=at(10)).granted
    assert not seeded.locks.acquire_locks(b, [NFS_X], now=at(11)).granted  # b waits first
    waiting = seeded.locks.acquire_locks(c, [NFS_S], now=at(12))
    assert not waiting.granted  # a shared lock may not overtake b's exclusive wait
    assert {blocker.owner for blocker in waiting.blockers} == {a, b}
    assert [w.set_id for w in seeded.locks.lock_waits(now=at(13))] == [b, c]
    assert seeded.locks.release_locks(a, now=at(14)) == [b]
    assert seeded.locks.held_locks() == {b: (NFS_X,)}
    assert seeded.locks.acquire_locks(b, [NFS_X], now=at(15)).granted  # asking again: it has it
    assert seeded.locks.release_locks(b, [NFS_X], now=at(16)) == [c]
    assert seeded.locks.held_locks() == {c: (NFS_S,)}
    assert seeded.locks.lock_waits(now=at(17)) == []


def test_a_waiter_that_stops_asking_is_dropped(seeded: Repository) -> None:
    a, b, c = (running(seeded, f"s{i}.lab") for i in (1, 2, 3))
    seeded.locks.acquire_locks(a, [NFS_X], now=at(10))
    seeded.locks.acquire_locks(b, [NFS_X], now=at(11))  # then b's supervisor dies
    assert not seeded.locks.acquire_locks(c, [NFS_X], now=at(30)).granted  # behind b
    seeded.locks.acquire_locks(c, [NFS_X], now=at(75))  # c keeps asking; b has been quiet 64 s
    assert [w.set_id for w in seeded.locks.lock_waits(now=at(80))] == [c]
    assert seeded.locks.release_locks(a, now=at(81)) == [c]


def test_only_running_sets_take_locks_and_ended_sets_lose_theirs(seeded: Repository) -> None:
    waiting = scheduled_set(seeded, "s1.lab")
    with pytest.raises(ConflictError, match="not running"):
        seeded.locks.acquire_locks(waiting, [NFS_X], now=at(4))
    a, b = running(seeded, "s2.lab"), running(seeded, "s3.lab")
    seeded.locks.acquire_locks(a, [NFS_X, NET], now=at(10))
    seeded.locks.acquire_locks(b, [NFS_S], now=at(11))
    (recipe,) = (r.id for r in seeded.jobs.get_recipe_set(a).recipes)
    seeded.moves.move_recipe(recipe, RecipeState.ABORTED, now=at(12), reason="gone")
    assert seeded.locks.release_ended_locks(now=at(13)) == [b]
    assert seeded.locks.held_locks() == {b: (NFS_S,)}


def test_a_wait_that_would_deadlock_is_refused(seeded: Repository) -> None:
    a, b = running(seeded, "s1.lab"), running(seeded, "s2.lab")
    seeded.locks.acquire_locks(a, [NFS_X], now=at(10))
    seeded.locks.acquire_locks(b, [NET], now=at(10))
    assert not seeded.locks.acquire_locks(a, [NET], now=at(11)).granted  # a waits for b
    refused = seeded.locks.acquire_locks(b, [NFS_X], now=at(12))
    assert refused.refused is not None
    assert "deadlock" in refused.refused
    assert [w.set_id for w in seeded.locks.lock_waits(now=at(13))] == [a]


def test_two_tasks_of_one_set_wait_side_by_side(seeded: Repository) -> None:
    a, b = running(seeded, "s1.lab"), running(seeded, "s2.lab")
    assert seeded.locks.acquire_locks(a, [NFS_X, NET], now=at(10)).granted
    assert not seeded.locks.acquire_locks(b, [NFS_X], now=at(11)).granted
    assert not seeded.locks.acquire_locks(b, [NET], now=at(12)).granted
    assert not seeded.locks.acquire_locks(b, [NFS_X], now=at(50)).granted  # asks again: same place
    waits = seeded.locks.lock_waits(now=at(60))
    assert [(w.set_id, w.grants) for w in waits] == [(b, (NFS_X,)), (b, (NET,))]
    seeded.locks.acquire_locks(b, [NFS_X], now=at(100))  # the NET request went quiet: it is dropped
    assert [w.grants for w in seeded.locks.lock_waits(now=at(101))] == [(NFS_X,)]
    assert seeded.locks.release_locks(a, now=at(102)) == [b]
    assert seeded.locks.held_locks() == {b: (NFS_X,)}
