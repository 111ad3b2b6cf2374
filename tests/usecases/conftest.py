"""The use cases against a real SQLite repository: one migrated template, copied per test."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from labq.domain.model import User
from labq.store import Repository, make_engine, upgrade
from tests.contract.conftest import seed


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "labq.db"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture
def repo(template: Path, tmp_path: Path) -> Iterator[Repository]:
    """A seeded lab (``tests.contract.conftest.seed``) in one transaction, rolled back after."""
    path = tmp_path / "labq.db"
    shutil.copyfile(template, path)
    engine = make_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            conn.begin()
            repository = Repository(conn)
            seed(repository)
            yield repository
            conn.rollback()
    finally:
        engine.dispose()


def user(repo: Repository, name: str) -> User:
    """A stored user as the use cases get it from an adapter."""
    return repo.get_user(name)
