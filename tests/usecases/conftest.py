"""Use cases run on a real store (every store the contract tests use), one transaction
per test, rolled back at the end."""

from __future__ import annotations

from tests.contract.conftest import conn, db, repo, seeded, sqlite_template

__all__ = ["conn", "db", "repo", "seeded", "sqlite_template"]
