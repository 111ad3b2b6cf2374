"""Use cases run on a real store (every store the contract tests use), one transaction
per test, rolled back at the end."""

from __future__ import annotations

from labq.domain.model import User
from labq.store import Repository
from tests.contract.conftest import conn, db, repo, seeded, sqlite_template

__all__ = ["conn", "db", "repo", "seeded", "sqlite_template", "user"]


def user(repo: Repository, name: str) -> User:
    """A stored user as the use cases get it from an adapter."""
    return repo.people.get_user(name)
