"""Every contract test runs against every store: SQLite and PostgreSQL.

SQLite: the schema is migrated once into a template file, copied per test.
PostgreSQL: migrated once into ``labq_template_<pid>``; each test gets a fresh
``CREATE DATABASE … TEMPLATE`` copy, dropped afterwards. No server: skipped on a
laptop, failed under ``CI=true``.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import URL, Connection, Engine, make_url

from labq.domain.job import JobSpec
from labq.domain.model import System
from labq.domain.states import Condition
from labq.store import Repository, make_engine, upgrade
from tests.conftest import pg_copy

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ADMIN = "root"
_copies = itertools.count()


def at(seconds: float) -> datetime:
    """A moment ``seconds`` after the tests' epoch."""
    return T0 + timedelta(seconds=seconds)


@dataclass
class Database:
    """One fresh, migrated database for one test."""

    url: URL
    engine: Engine


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "labq.db"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A fresh migrated database of each kind."""
    if request.param == "sqlite":
        path = tmp_path / "labq.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        url = make_url(f"sqlite:///{path}")
        engine = make_engine(url)
        yield Database(url, engine)
        engine.dispose()
        return
    with pg_copy(request.getfixturevalue("pg_server")) as url:
        engine = make_engine(url)
        try:
            yield Database(url, engine)
        finally:
            engine.dispose()


@pytest.fixture
def conn(db: Database) -> Iterator[Connection]:
    """A connection inside one transaction, rolled back at the end."""
    with db.engine.connect() as connection:
        connection.begin()
        yield connection
        connection.rollback()


@pytest.fixture
def repo(conn: Connection) -> Repository:
    return Repository(conn)


def seed(repo: Repository) -> None:
    """A small lab: two automated systems and a manual one, two users, one group, one pool."""
    now = at(0)
    repo.systems.add_lab("lab1", actor=ADMIN, now=now)
    repo.people.add_group("kernel-qe", actor=ADMIN, now=now)
    for name in ("alice", "bob"):
        repo.people.add_user(name, actor=ADMIN, now=now)
    repo.people.add_member("alice", "kernel-qe", actor=ADMIN, now=now)
    repo.access.add_pool("perf", actor=ADMIN, now=now)
    repo.systems.add_system(
        System("s1.lab", "lab1", attributes={"memory_mb": 8192}, pools=frozenset({"perf"})),
        actor=ADMIN,
        now=now,
    )
    repo.systems.add_system(System("s2.lab", "lab1"), actor=ADMIN, now=now)
    repo.systems.add_system(
        System("s3.lab", "lab1", condition=Condition.MANUAL), actor=ADMIN, now=now
    )


@pytest.fixture
def seeded(repo: Repository) -> Repository:
    seed(repo)
    return repo


def job_spec(*sizes: int, **fields: object) -> JobSpec:
    """A job with one recipe set per size given (default: one set of one recipe)."""
    recipe_sets = [
        {"recipes": [{"role": f"r{i}", "tasks": [{"name": "t", "run": "true"}]} for i in range(n)]}
        for n in (sizes or (1,))
    ]
    return JobSpec.model_validate({"recipe_sets": recipe_sets, **fields})


def recipe_ids(repo: Repository, job_id: int) -> list[list[int]]:
    """The recipe ids of each set of a job, in order."""
    return [[r.id for r in s.recipes] for s in repo.jobs.load_job(job_id).sets]
