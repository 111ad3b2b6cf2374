"""Engines and transactions: SQLite set up for one writer, commits and rollbacks on both."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from labq.store import make_engine, reading, transaction, upgrade

from .conftest import ADMIN, Database, at


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'labq.db'}"
    upgrade(url)
    return url


def test_sqlite_connections_use_wal_foreign_keys_and_wait_when_busy(sqlite_url: str) -> None:
    engine = make_engine(sqlite_url)
    with engine.connect() as conn:
        pragma = {
            name: conn.exec_driver_sql(f"PRAGMA {name}").scalar()
            for name in ("journal_mode", "foreign_keys", "busy_timeout")
        }
    engine.dispose()
    assert pragma == {"journal_mode": "wal", "foreign_keys": 1, "busy_timeout": 30000}


def test_a_sqlite_write_transaction_takes_the_lock_when_it_begins(sqlite_url: str) -> None:
    engine = make_engine(sqlite_url)
    impatient = make_engine(sqlite_url, connect_args={"timeout": 0.05})
    try:
        with transaction(engine):
            # Nothing written yet, but BEGIN IMMEDIATE already holds the write lock...
            with pytest.raises(OperationalError, match="locked"), transaction(impatient):
                pass
            # ...while readers go on (WAL, deferred BEGIN).
            with reading(impatient) as repo:
                assert repo.systems.list_labs() == []
    finally:
        engine.dispose()
        impatient.dispose()


def test_a_transaction_commits_at_the_end_and_rolls_back_on_error(db: Database) -> None:
    with transaction(db.engine) as repo:
        repo.systems.add_lab("kept", actor=ADMIN, now=at(0))
    with pytest.raises(RuntimeError):
        _fail_after_a_write(db)
    with reading(db.engine) as repo:
        assert repo.systems.list_labs() == ["kept"]


def _fail_after_a_write(db: Database) -> None:
    with transaction(db.engine) as repo:
        repo.systems.add_lab("lost", actor=ADMIN, now=at(0))
        raise RuntimeError("the caller failed after the write")


def test_reading_never_writes(db: Database) -> None:
    with reading(db.engine) as repo:
        repo.systems.add_lab("scratch", actor=ADMIN, now=at(0))
        assert repo.systems.list_labs() == ["scratch"]
    with db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM labs")).scalar() == 0
