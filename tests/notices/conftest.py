from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine

from labq.domain.job import JobSpec
from labq.store import make_engine, transaction, upgrade

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("notices-template") / "labq.db"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture
def engine(template: Path, tmp_path: Path) -> Iterator[Engine]:
    """A fresh migrated database with root (admin), alice (in kernel-qe) and bob."""
    path = tmp_path / "labq.db"
    path.write_bytes(template.read_bytes())
    made = make_engine(f"sqlite:///{path}")
    with transaction(made) as repo:
        repo.people.add_user("root", actor="setup", now=T0, admin=True)
        for name in ("alice", "bob"):
            repo.people.add_user(name, actor="root", now=T0)
        repo.people.add_group("kernel-qe", actor="root", now=T0)
        repo.people.add_member("alice", "kernel-qe", actor="root", now=T0)
    yield made
    made.dispose()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def ended_job(engine: Engine, now: datetime, *, owner: str = "alice", **fields: object) -> int:
    """A job stored and cancelled before it started: ended, at ``now``."""
    spec = JobSpec.model_validate(
        {"recipe_sets": [{"recipes": [{"tasks": [{"name": "t", "run": "true"}]}]}], **fields}
    )
    with transaction(engine) as repo:
        job_id = repo.queue.submit_job(spec, owner=owner, now=now, source_format="native")
        repo.queue.cancel_job(job_id, actor=owner, now=now)
    return job_id


def open_job(engine: Engine, now: datetime, *, owner: str = "alice") -> int:
    """A job stored and not ended."""
    spec = JobSpec.model_validate(
        {"recipe_sets": [{"recipes": [{"tasks": [{"name": "t", "run": "true"}]}]}]}
    )
    with transaction(engine) as repo:
        return repo.queue.submit_job(spec, owner=owner, now=now, source_format="native")
