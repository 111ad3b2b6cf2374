"""The first admin of a new database (``labq init`` and ``labq demo``)."""

from __future__ import annotations

from datetime import UTC, datetime

from labq.store import database
from labq.store.repository import transaction


def first_admin(url: str, name: str, *, actor: str = "labq init") -> str | None:
    """On a database without users, create an admin and a token; return the token."""
    engine = database.make_engine(url)
    try:
        with transaction(engine) as repo:
            if repo.people.list_users():
                return None
            now = datetime.now(UTC)
            repo.people.add_user(name, actor=actor, now=now, admin=True)
            _, secret = repo.tokens.create_token(name, f"created by {actor}", now=now)
            return secret
    finally:
        engine.dispose()
