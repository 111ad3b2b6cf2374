"""``labq user``, ``labq group`` and ``labq token``."""

from __future__ import annotations

from typing import Any

import click

from labq.commands import api, cell, fields, json_option, show, table, when


@click.group()
def user() -> None:
    """Users (adding needs an admin)."""


@user.command("add")
@click.argument("name")
@click.option("--admin", is_flag=True, help="Make the user an admin.")
@json_option
@click.pass_context
def add_user(ctx: click.Context, name: str, admin: bool, as_json: bool) -> None:
    """Add a user (then: labq token create NAME-token --user NAME)."""
    added = api(ctx).post("/users", {"name": name, "admin": admin})
    show(added, as_json, lambda d: f"added {'admin' if d['admin'] else 'user'} {d['name']!r}")


@user.command("list")
@json_option
@click.pass_context
def list_users(ctx: click.Context, as_json: bool) -> None:
    """List users with their groups."""
    users = api(ctx).get("/users")

    def render(data: dict[str, Any]) -> Any:
        return table(
            ["user", "admin", "groups"],
            [[u["name"], "yes" if u["admin"] else "", cell(u["groups"])] for u in data["users"]],
        )

    show(users, as_json, render)


@user.command("me")
@json_option
@click.pass_context
def me(ctx: click.Context, as_json: bool) -> None:
    """Who the token speaks for."""
    show(api(ctx).get("/users/me"), as_json, lambda d: fields(d, ["name", "admin", "groups"]))


@click.group()
def group() -> None:
    """Groups: who jobs run for (changes need an admin)."""


@group.command("add")
@click.argument("name")
@json_option
@click.pass_context
def add_group(ctx: click.Context, name: str, as_json: bool) -> None:
    """Add a group."""
    added = api(ctx).post("/groups", {"name": name})
    show(added, as_json, lambda d: f"added group {d['name']!r}")


@group.command("list")
@json_option
@click.pass_context
def list_groups(ctx: click.Context, as_json: bool) -> None:
    """List groups with their members."""
    groups = api(ctx).get("/groups")

    def render(data: dict[str, Any]) -> Any:
        return table(
            ["group", "members"], [[g["name"], cell(g["members"])] for g in data["groups"]]
        )

    show(groups, as_json, render)


@group.command("add-member")
@click.argument("group_name", metavar="GROUP")
@click.argument("user_name", metavar="USER")
@json_option
@click.pass_context
def add_member(ctx: click.Context, group_name: str, user_name: str, as_json: bool) -> None:
    """Put a user in a group."""
    done = api(ctx).post(f"/groups/{group_name}/members", {"user": user_name})
    show(done, as_json, lambda d: f"{d['user']} is in group {d['group']}")


@group.command("remove-member")
@click.argument("group_name", metavar="GROUP")
@click.argument("user_name", metavar="USER")
@json_option
@click.pass_context
def remove_member(ctx: click.Context, group_name: str, user_name: str, as_json: bool) -> None:
    """Take a user out of a group."""
    done = api(ctx).delete(f"/groups/{group_name}/members/{user_name}")
    show(done, as_json, lambda d: f"{d['user']} is not in group {d['group']}")


@click.group()
def token() -> None:
    """API tokens: your own (admins: anyone's)."""


@token.command("create")
@click.argument("name")
@click.option("--user", "user_name", default=None, help="For another user (admins).")
@click.option("--expires-in", type=click.IntRange(min=1), default=None, help="Seconds to live.")
@json_option
@click.pass_context
def create_token(
    ctx: click.Context, name: str, user_name: str | None, expires_in: int | None, as_json: bool
) -> None:
    """Create a token and print its secret: shown this once, never again."""
    body: dict[str, Any] = {"name": name}
    if user_name is not None:
        body["user"] = user_name
    if expires_in is not None:
        body["expires_in"] = expires_in
    created = api(ctx).post("/tokens", body)

    def render(d: dict[str, Any]) -> str:
        until = f", expires {d['expires_at']}" if d["expires_at"] else ""
        return (
            f"token {d['id']} {d['name']!r} for {d['user']}{until}; shown only now:\n{d['secret']}"
        )

    show(created, as_json, render)


@token.command("list")
@click.option("--user", "user_name", default=None, help="Another user's tokens (admins).")
@json_option
@click.pass_context
def list_tokens(ctx: click.Context, user_name: str | None, as_json: bool) -> None:
    """List tokens (never their secrets), revoked and expired ones included."""
    tokens = api(ctx).get("/tokens", {"user": user_name})

    def render(data: dict[str, Any]) -> Any:
        return table(
            ["id", "user", "name", "created", "last used", "expires", "revoked"],
            [
                [
                    t["id"],
                    t["user"],
                    t["name"],
                    when(t["created_at"]),
                    when(t["last_used_at"]),
                    when(t["expires_at"]),
                    when(t["revoked_at"]),
                ]
                for t in data["tokens"]
            ],
        )

    show(tokens, as_json, render)


@token.command("revoke")
@click.argument("token_id", metavar="ID", type=int)
@json_option
@click.pass_context
def revoke_token(ctx: click.Context, token_id: int, as_json: bool) -> None:
    """Revoke a token for good."""
    done = api(ctx).delete(f"/tokens/{token_id}")
    show(done, as_json, lambda d: f"token {d['id']} revoked")
