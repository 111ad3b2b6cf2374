"""Users, groups and API tokens.

Everyone may list users and groups; admins add them and change memberships. Each user
lists, creates and revokes their own tokens; admins anyone's. A new token's secret is
returned once, when it is made, and never again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from labq.domain.model import User
from labq.errors import ForbiddenError
from labq.store import Repository
from labq.usecases.permissions import require_admin


def add_user(repo: Repository, caller: User, name: str, *, admin: bool, now: datetime) -> User:
    """Add a user (admins); returns it as stored."""
    require_admin(caller)
    repo.people.add_user(name, actor=caller.name, now=now, admin=admin)
    return repo.people.get_user(name)


def add_group(repo: Repository, caller: User, name: str, *, now: datetime) -> int:
    """Add a group (admins); returns its id."""
    require_admin(caller)
    return repo.people.add_group(name, actor=caller.name, now=now)


def add_member(repo: Repository, caller: User, group: str, user: str, *, now: datetime) -> bool:
    """Put a user in a group (admins); whether it changed anything."""
    require_admin(caller)
    return repo.people.add_member(user, group, actor=caller.name, now=now)


def remove_member(repo: Repository, caller: User, group: str, user: str, *, now: datetime) -> bool:
    """Take a user out of a group (admins); whether it changed anything."""
    require_admin(caller)
    return repo.people.remove_member(user, group, actor=caller.name, now=now)


def tokens_owner(caller: User, wanted: str | None) -> str:
    """Whose tokens ``caller`` manages when naming ``wanted`` (none: their own); only
    admins may manage another user's."""
    if wanted is None or wanted == caller.name:
        return caller.name
    if not caller.admin:
        raise ForbiddenError(f"only admins may manage another user's tokens ({wanted!r})")
    return wanted


@dataclass(frozen=True)
class NewToken:
    """A token just made: its id, whose it is, when it expires, and its secret."""

    id: int
    user: str
    expires_at: datetime | None
    secret: str


def create_token(
    repo: Repository,
    caller: User,
    name: str,
    *,
    user: str | None,
    expires_in: int | None,
    now: datetime,
) -> NewToken:
    """A new token for ``user`` (none: the caller), expiring ``expires_in`` seconds from
    now (none: never)."""
    whose = tokens_owner(caller, user)
    expires = None if expires_in is None else now + timedelta(seconds=expires_in)
    token_id, secret = repo.tokens.create_token(
        whose, name, now=now, expires_at=expires, actor=caller.name
    )
    return NewToken(token_id, whose, expires, secret)


def revoke_token(repo: Repository, caller: User, token_id: int, *, now: datetime) -> bool:
    """Revoke a token for good: the caller's own, or (admins) anyone's."""
    if repo.tokens.token_owner(token_id) != caller.name:
        require_admin(caller)
    return repo.tokens.revoke_token(token_id, actor=caller.name, now=now)
