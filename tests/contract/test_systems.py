"""Labs and systems: adding, listing, condition and usage changes, with history and activity."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime

import pytest
from sqlalchemy import URL, text

from labq.domain.inventory import Inventory, parse_inventory
from labq.domain.model import System
from labq.domain.states import Condition, Usage
from labq.domain.usage import UsageRecord
from labq.errors import ConflictError, IllegalTransition, NotFoundError
from labq.store import Repository, epoch, make_engine
from tests.conftest import pg_copy

from .conftest import ADMIN, Database, at


def test_an_automated_system_starts_idle_then_pending(seeded: Repository) -> None:
    t0 = epoch(at(0))
    assert seeded.systems.usage_history("s1.lab") == [
        UsageRecord("s1.lab", Usage.IDLE, Condition.AUTOMATED, None, t0, t0),
        UsageRecord("s1.lab", Usage.PENDING, Condition.AUTOMATED, None, t0, None),
    ]
    assert seeded.systems.usage_history("s3.lab") == [
        UsageRecord("s3.lab", Usage.IDLE, Condition.MANUAL, None, t0, None)
    ]


def test_systems_load_back_as_the_domain_sees_them(seeded: Repository) -> None:
    s1 = seeded.systems.get_system("s1.lab")
    assert s1 == System(
        "s1.lab",
        "lab1",
        attributes={"memory_mb": 8192},
        pools=frozenset({"perf"}),
        usage=Usage.PENDING,
    )
    assert [s.fqdn for s in seeded.systems.list_systems()] == ["s1.lab", "s2.lab", "s3.lab"]
    assert [s.fqdn for s in seeded.systems.list_systems(pool="perf")] == ["s1.lab"]
    assert len(seeded.systems.list_systems(lab="lab1")) == 3
    assert seeded.systems.list_labs() == ["lab1"]


def test_adding_needs_a_new_name_and_known_lab_owner_and_pools(seeded: Repository) -> None:
    with pytest.raises(ConflictError):
        seeded.systems.add_system(System("s1.lab", "lab1"), actor=ADMIN, now=at(1))
    for system in (
        System("x.lab", "nowhere"),
        System("x.lab", "lab1", owner="nobody"),
        System("x.lab", "lab1", pools=frozenset({"nopool"})),
    ):
        with pytest.raises(NotFoundError):
            seeded.systems.add_system(system, actor=ADMIN, now=at(1))
    with pytest.raises(NotFoundError):
        seeded.systems.get_system("x.lab")


def test_a_broken_free_system_goes_idle_with_a_history_row_and_a_reason(
    seeded: Repository,
) -> None:
    changed = seeded.systems.set_condition(
        "s1.lab", Condition.BROKEN, now=at(10), actor="carol", reason="disk died"
    )
    assert changed
    system = seeded.systems.get_system("s1.lab")
    assert (system.condition, system.usage) == (Condition.BROKEN, Usage.IDLE)
    assert seeded.systems.condition_reason("s1.lab") == "disk died"
    last_two = seeded.systems.usage_history("s1.lab")[-2:]
    assert last_two == [
        UsageRecord(
            "s1.lab", Usage.PENDING, Condition.AUTOMATED, None, epoch(at(0)), epoch(at(10))
        ),
        UsageRecord("s1.lab", Usage.IDLE, Condition.BROKEN, None, epoch(at(10)), None),
    ]
    entry = seeded.log.activity(kind="system")[0]
    assert (entry.actor, entry.action, entry.old_value, entry.new_value, entry.reason) == (
        "carol",
        "condition",
        "automated",
        "broken",
        "disk died",
    )


def test_repeating_a_condition_changes_nothing(seeded: Repository) -> None:
    before = seeded.systems.usage_history("s2.lab")
    assert not seeded.systems.set_condition("s2.lab", Condition.AUTOMATED, now=at(5), actor=ADMIN)
    assert seeded.systems.usage_history("s2.lab") == before


def test_made_automated_a_manual_system_becomes_pending(seeded: Repository) -> None:
    seeded.systems.set_condition("s3.lab", Condition.AUTOMATED, now=at(5), actor=ADMIN)
    assert seeded.systems.get_system("s3.lab").usage is Usage.PENDING


def test_a_free_system_moves_between_pending_and_idle(seeded: Repository) -> None:
    assert seeded.systems.set_usage("s1.lab", Usage.IDLE, now=at(3))
    assert not seeded.systems.set_usage("s1.lab", Usage.IDLE, now=at(4))
    assert seeded.systems.get_system("s1.lab").usage is Usage.IDLE
    assert len(seeded.systems.usage_history("s1.lab")) == 3


def test_busy_usages_come_only_with_a_recipe(seeded: Repository) -> None:
    with pytest.raises(IllegalTransition):
        seeded.systems.set_usage("s1.lab", Usage.RUNNING, now=at(3))
    assert seeded.systems.get_system("s1.lab").usage is Usage.PENDING


def test_history_never_goes_back_in_time(seeded: Repository) -> None:
    seeded.systems.set_usage("s1.lab", Usage.IDLE, now=at(10))
    # a clock behind the open row's start: the change happens where that row started
    seeded.systems.set_usage("s1.lab", Usage.PENDING, now=at(5))
    assert seeded.systems.get_system("s1.lab").usage is Usage.PENDING
    idle, pending = seeded.systems.usage_history("s1.lab")[-2:]
    assert (idle.usage, idle.start, idle.end) == (Usage.IDLE, epoch(at(10)), epoch(at(10)))
    assert (pending.usage, pending.start, pending.end) == (Usage.PENDING, epoch(at(10)), None)


def test_admin_changes_are_logged(seeded: Repository) -> None:
    actions = {(e.object_kind, e.action, e.object_name) for e in seeded.log.activity(limit=50)}
    assert {
        ("lab", "add", "lab1"),
        ("user", "add", "alice"),
        ("group", "add", "kernel-qe"),
        ("group", "add member", "kernel-qe"),
        ("pool", "add", "perf"),
        ("system", "add", "s1.lab"),
    } <= actions


def test_an_inventory_is_stored_read_back_and_logged(seeded: Repository) -> None:
    inventory = parse_inventory(
        {
            "devices": [{"driver": "e1000e", "bus": "pci"}],
            "disks": [{"size": 512, "model": "x"}],
            "cpu_flags": ["vmx"],
            "last_inventoried": "2026-01-01",
        }
    )
    assert seeded.systems.get_system("s1.lab").inventory == Inventory()
    assert seeded.systems.set_inventory("s1.lab", inventory, actor=ADMIN, now=at(5)) is True
    assert seeded.systems.set_inventory("s1.lab", inventory, actor=ADMIN, now=at(6)) is False
    assert seeded.systems.get_system("s1.lab").inventory == inventory
    assert seeded.systems.get_system("s1.lab").facts()["disk_count"] == 1
    logged = [e for e in seeded.log.activity(limit=50) if e.action == "inventory"]
    assert [(e.object_kind, e.object_name) for e in logged] == [("system", "s1.lab")]
    with pytest.raises(NotFoundError):
        seeded.systems.set_inventory("nope.lab", inventory, actor=ADMIN, now=at(7))


def test_a_system_knows_when_it_was_added(seeded: Repository) -> None:
    s1 = seeded.systems.get_system("s1.lab")
    assert s1.added == "2026-01-01T00:00:00Z"  # the seed adds everything at the tests' epoch
    assert s1.facts()["added"] == s1.added


MAKERS: dict[str, Callable[[Repository, str, datetime], int]] = {
    "lab": lambda repo, name, now: repo.systems.add_lab(name, actor=ADMIN, now=now),
    "pool": lambda repo, name, now: repo.access.add_pool(name, actor=ADMIN, now=now),
}


@pytest.mark.postgres
@pytest.mark.parametrize("kind", MAKERS)
def test_a_name_made_by_another_transaction_since_we_looked_is_a_conflict(
    pg_server: URL, kind: str
) -> None:
    """A leader makes the labs and pools of its VM slots while an admin may be adding the
    same one: the loser's insert waits on the unique index and must come out as 409's
    ConflictError, not 500. (PostgreSQL only: SQLite lets one writer in at a time.)"""
    with pg_copy(pg_server) as url:
        engine = make_engine(url)
        try:
            _race(Database(url, engine), MAKERS[kind])
        finally:
            engine.dispose()


def _race(db: Database, make: Callable[[Repository, str, datetime], int]) -> None:
    outcome: list[BaseException | int] = []
    with db.engine.connect() as other:
        other.begin()
        make(Repository(other), "new9", at(0))  # not committed
        with db.engine.connect() as mine:
            mine.begin()

            def add() -> None:  # looks, sees nothing, then waits on the other's insert
                try:
                    outcome.append(make(Repository(mine), "new9", at(1)))
                except BaseException as exc:
                    outcome.append(exc)

            adding = threading.Thread(target=add)
            adding.start()
            _wait_for_lock_wait(db)
            other.commit()
            adding.join(timeout=60)
            mine.rollback()
    assert len(outcome) == 1, outcome
    assert isinstance(outcome[0], ConflictError), outcome


def _wait_for_lock_wait(db: Database) -> None:
    """Until a backend of this database waits for a lock (the second insert)."""
    with db.engine.connect() as probe:
        for _ in range(600):
            waiting = probe.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )
            ).scalar_one()
            if waiting:
                return
            probe.rollback()
            time.sleep(0.1)
    raise AssertionError("the second insert never waited on the first")
