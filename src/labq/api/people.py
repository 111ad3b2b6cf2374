"""``/users``, ``/groups`` and ``/tokens``.

Everyone may list users and groups; admins add them and change memberships.
Tokens: each user lists, creates and revokes their own; admins anyone's. A new
token's secret is in the creation answer and nowhere else, ever.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import Field

from labq.api.openapi import answers
from labq.domain.model import User
from labq.gateway.deps import AdminDep, StateDep, UserDep
from labq.gateway.schemas import INTEGRAL, Body, Name, NameBody, RowId
from labq.store import TokenView, reading, transaction
from labq.usecases import people

users = APIRouter(prefix="/users", tags=["users"])
groups = APIRouter(prefix="/groups", tags=["groups"])
tokens = APIRouter(prefix="/tokens", tags=["tokens"])


class UserBody(Body):
    """A new user."""

    name: Name
    admin: bool = False


class MemberBody(Body):
    """A user to put in a group."""

    user: Name


class TokenBody(Body):
    """A new token: for yourself, or (admins) for ``user``."""

    name: Name
    user: Name | None = None
    expires_in: Annotated[int, Field(gt=0, le=10 * 365 * 86400), INTEGRAL] | None = Field(
        default=None, description="seconds until it stops working; none: never"
    )


def user_json(user: User) -> dict[str, Any]:
    """A user as the API shows it."""
    return {"name": user.name, "admin": user.admin, "groups": sorted(user.groups)}


def token_json(token: TokenView) -> dict[str, Any]:
    """A token as listed: never its secret."""
    return {
        "id": token.id,
        "user": token.user,
        "name": token.name,
        "created_at": token.created_at,
        "last_used_at": token.last_used_at,
        "expires_at": token.expires_at,
        "revoked_at": token.revoked_at,
        "recipe_set": token.recipe_set,
    }


@users.get("")
def list_users(state: StateDep, _: UserDep) -> dict[str, Any]:
    """Every user with their groups."""
    with reading(state.engine) as repo:
        return {"users": [user_json(u) for u in repo.people.list_users()]}


@users.get("/me")
def me(user: UserDep) -> dict[str, Any]:
    """Who the token speaks for."""
    return user_json(user)


@users.post("", status_code=201, responses=answers(409))
def add_user(body: UserBody, state: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Add a user (admins)."""
    with transaction(state.engine) as repo:
        added = people.add_user(repo, admin, body.name, admin=body.admin, now=state.clock())
    return user_json(added)


@groups.get("")
def list_groups(state: StateDep, _: UserDep) -> dict[str, Any]:
    """Every group with its members (everyone is in ``everybody`` without being listed)."""
    with reading(state.engine) as repo:
        names = repo.people.list_groups()
        people = repo.people.list_users()
    return {
        "groups": [{"name": g, "members": [u.name for u in people if g in u.groups]} for g in names]
    }


@groups.post("", status_code=201, responses=answers(409))
def add_group(body: NameBody, state: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Add a group (admins)."""
    with transaction(state.engine) as repo:
        group_id = people.add_group(repo, admin, body.name, now=state.clock())
    return {"id": group_id, "name": body.name, "members": []}


@groups.post("/{group}/members", responses=answers(404))
def add_member(group: str, body: MemberBody, state: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Put a user in a group (admins)."""
    with transaction(state.engine) as repo:
        changed = people.add_member(repo, admin, group, body.user, now=state.clock())
    return {"group": group, "user": body.user, "changed": changed}


@groups.delete("/{group}/members/{user}", responses=answers(404))
def remove_member(group: str, user: str, state: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Take a user out of a group (admins)."""
    with transaction(state.engine) as repo:
        changed = people.remove_member(repo, admin, group, user, now=state.clock())
    return {"group": group, "user": user, "changed": changed}


@tokens.get("", responses=answers(403, 404))
def list_tokens(state: StateDep, caller: UserDep, user: str | None = None) -> dict[str, Any]:
    """Your tokens (admins: ``?user=``), revoked and expired ones included."""
    whose = people.tokens_owner(caller, user)
    with reading(state.engine) as repo:
        return {"tokens": [token_json(t) for t in repo.tokens.list_tokens(whose)]}


@tokens.post("", status_code=201, responses=answers(404))
def create_token(body: TokenBody, state: StateDep, caller: UserDep) -> dict[str, Any]:
    """A new token; its ``secret`` is shown in this answer only."""
    with transaction(state.engine) as repo:
        made = people.create_token(
            repo,
            caller,
            body.name,
            user=body.user,
            expires_in=body.expires_in,
            now=state.clock(),
        )
    return {
        "id": made.id,
        "user": made.user,
        "name": body.name,
        "expires_at": made.expires_at,
        "secret": made.secret,
    }


@tokens.delete("/{token_id}", responses=answers(404))
def revoke_token(token_id: RowId, state: StateDep, caller: UserDep) -> dict[str, Any]:
    """Revoke a token for good: your own, or (admins) anyone's."""
    with transaction(state.engine) as repo:
        changed = people.revoke_token(repo, caller, token_id, now=state.clock())
    return {"id": token_id, "revoked": True, "changed": changed}
