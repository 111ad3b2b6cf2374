"""The installation's id and the leader epoch that fences every scheduling transaction."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from labq.errors import LeadershipLost
from labq.store import Repository, transaction

from .conftest import Database, at


def test_the_installation_has_one_lasting_id(repo: Repository) -> None:
    first = repo.leadership.installation_id()
    assert uuid.UUID(first)
    assert repo.leadership.installation_id() == first


def test_each_new_leader_takes_the_next_epoch_and_the_old_one_is_fenced_out(
    repo: Repository,
) -> None:
    assert repo.leadership.leader().epoch == 0
    old = repo.leadership.take_leadership("host-a pid 1", now=at(1))
    repo.leadership.fence(old)
    new = repo.leadership.take_leadership("host-b pid 2", now=at(2))
    assert new == old + 1
    assert repo.leadership.leader() == (new, "host-b pid 2", at(2))
    repo.leadership.fence(new)
    with pytest.raises(LeadershipLost, match=f"epoch {new} was taken by host-b pid 2"):
        repo.leadership.fence(old)


def test_a_new_leader_waits_for_the_old_leaders_last_transaction(db: Database) -> None:
    """Whatever a deposed leader commits, its successor reads; after that it can commit nothing."""
    if db.engine.dialect.name == "sqlite":
        pytest.skip("SQLite has one writer at a time: the question cannot arise")
    with transaction(db.engine) as repo:
        old = repo.leadership.take_leadership("old", now=at(1))
    taken: list[int] = []
    with db.engine.connect() as conn:
        tx = conn.begin()
        Repository(conn).leadership.fence(old)  # the old leader is inside a scheduling transaction
        Repository(conn).systems.add_lab("decided-by-old", actor="scheduler", now=at(2))

        def elect() -> None:
            with transaction(db.engine) as repo:
                taken.append(repo.leadership.take_leadership("new", now=at(3)))
                taken.append(
                    len(repo.systems.list_labs())
                )  # what the new leader's rebuild would read

        thread = threading.Thread(target=elect)
        thread.start()
        time.sleep(0.5)
        assert taken == [], "the election waited for the old leader's transaction"
        tx.commit()
        thread.join(10)
    assert taken == [old + 1, 1], "the new leader saw what the old one committed"
    with transaction(db.engine) as repo, pytest.raises(LeadershipLost):
        repo.leadership.fence(old)
