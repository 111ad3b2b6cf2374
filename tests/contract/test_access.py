"""Pools, people and access rules: stored, loaded back, logged."""

from __future__ import annotations

import pytest

from labq.domain.model import AccessPolicy, User
from labq.domain.priority import Priority
from labq.errors import ConflictError, NotFoundError
from labq.store import Repository

from .conftest import ADMIN, at


def test_the_access_policy_round_trips(seeded: Repository) -> None:
    seeded.access.add_pool("closed", actor=ADMIN, now=at(0))
    seeded.access.add_pool("open", actor=ADMIN, now=at(0))
    expected = AccessPolicy()
    steps = [
        ("allow", "perf", "kernel-qe", Priority.HIGH),
        ("allow", "perf", "everybody", Priority.MEDIUM),
        ("allow", "perf", "kernel-qe", Priority.URGENT),  # replaces the first rule
        ("allow", "closed", "kernel-qe", Priority.LOW),
        ("revoke", "closed", "kernel-qe", None),  # the pool stays closed
    ]
    for verb, pool, group, cap in steps:
        if verb == "allow":
            assert cap is not None
            expected.allow(pool, group, cap)
            seeded.access.allow(pool, group, cap, actor=ADMIN, now=at(1))
        else:
            expected.revoke(pool, group)
            assert seeded.access.revoke(pool, group, actor=ADMIN, now=at(1))
    loaded = seeded.access.load_access_policy()
    assert loaded.rules == expected.rules
    assert loaded.maximum_on_pool("open", "kernel-qe") is Priority.URGENT
    assert loaded.maximum_on_pool("closed", "kernel-qe") is None
    assert not seeded.access.revoke("closed", "kernel-qe", actor=ADMIN, now=at(2))


def test_rules_need_a_known_pool_and_group(seeded: Repository) -> None:
    with pytest.raises(NotFoundError):
        seeded.access.allow("nopool", "kernel-qe", Priority.LOW, actor=ADMIN, now=at(1))
    with pytest.raises(NotFoundError):
        seeded.access.allow("perf", "nogroup", Priority.LOW, actor=ADMIN, now=at(1))
    assert seeded.access.load_access_policy().rules == {}


def test_systems_join_and_leave_pools(seeded: Repository) -> None:
    assert seeded.access.add_to_pool("s2.lab", "perf", actor=ADMIN, now=at(1))
    assert not seeded.access.add_to_pool("s2.lab", "perf", actor=ADMIN, now=at(1))
    assert [s.fqdn for s in seeded.systems.list_systems(pool="perf")] == ["s1.lab", "s2.lab"]
    assert seeded.access.remove_from_pool("s1.lab", "perf", actor=ADMIN, now=at(2))
    assert not seeded.access.remove_from_pool("s1.lab", "perf", actor=ADMIN, now=at(2))
    assert seeded.systems.get_system("s1.lab").pools == frozenset()
    assert seeded.access.list_pools() == ["perf"]


def test_users_groups_and_memberships(seeded: Repository) -> None:
    seeded.people.add_user("carol", actor=ADMIN, now=at(1), admin=True)
    assert seeded.people.get_user("carol") == User("carol", admin=True)
    assert seeded.people.get_user("alice") == User("alice", groups=frozenset({"kernel-qe"}))
    assert not seeded.people.add_member("alice", "kernel-qe", actor=ADMIN, now=at(1))
    assert not seeded.people.add_member("alice", "everybody", actor=ADMIN, now=at(1))
    assert seeded.people.remove_member("alice", "kernel-qe", actor=ADMIN, now=at(2))
    assert not seeded.people.remove_member("alice", "kernel-qe", actor=ADMIN, now=at(2))
    assert seeded.people.get_user("alice").groups == frozenset()
    assert [u.name for u in seeded.people.list_users()] == ["alice", "bob", "carol"]
    assert seeded.people.list_groups() == ["everybody", "kernel-qe"]
    with pytest.raises(ConflictError):
        seeded.people.add_user("carol", actor=ADMIN, now=at(3))
    with pytest.raises(ConflictError):
        seeded.people.add_group("everybody", actor=ADMIN, now=at(3))
    with pytest.raises(NotFoundError):
        seeded.people.get_user("nobody")
