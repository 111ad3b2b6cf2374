"""Who tasks run as on the local backend: dynamic user ids, fixed users, reachable paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from labq.dispatch.identity import DynamicUsers, fixed_user, parse_range, traversable
from labq.errors import LabqError


def test_each_running_set_gets_a_user_id_nobody_else_holds(tmp_path: Path) -> None:
    first, second, third = (DynamicUsers(tmp_path, range(70000, 70002)) for _ in range(3))
    a = first.take(set_id=4)
    b = second.take(set_id=4)  # the same starting place: it moves on
    assert {a.uid, b.uid} == {70000, 70001}
    assert a.gid == a.uid
    assert a.name == f"labq-{a.uid}"
    with pytest.raises(LabqError, match="every user id in 70000-70001 is in use"):
        third.take(set_id=5)
    first.give_back()
    assert third.take(set_id=5).uid == a.uid
    second.give_back()
    third.give_back()


def test_ranges_and_users_are_read_with_clear_errors() -> None:
    assert parse_range("61184-65519") == range(61184, 65520)
    for bad in ("10", "a-b", "0-5", "9-3"):
        with pytest.raises(LabqError, match="dynamic_uids"):
            parse_range(bad)
    assert fixed_user("root").uid == 0
    assert fixed_user("54321").uid == 54321
    with pytest.raises(LabqError, match="no user 'no-such-user-here'"):
        fixed_user("no-such-user-here")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs a directory closed to others: run as root")
def test_a_data_directory_that_tasks_cannot_reach_is_refused_plainly(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    with pytest.raises(LabqError, match=f"{closed} is closed to other users"):
        traversable(closed / "data", closed / "data" / "workspaces")
