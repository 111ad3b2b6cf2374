"""``labq pool``: pools, their systems and their access rules (changes need an admin)."""

from __future__ import annotations

from typing import Any

import click

from labq.commands import api, cell, json_option, show, table
from labq.domain.priority import Priority
from labq.errors import InputError


def priority_label(text: str, place: str) -> str:
    """A priority name, checked here so a typo is one plain line."""
    try:
        return Priority.parse(text).label
    except ValueError as exc:
        raise InputError(str(exc), place=place) from None


@click.group()
def pool() -> None:
    """Pools: named sets of systems that access rules hang on."""


@pool.command("add")
@click.argument("name")
@json_option
@click.pass_context
def add_pool(ctx: click.Context, name: str, as_json: bool) -> None:
    """Add a pool (open to every group until its first rule)."""
    added = api(ctx).post("/pools", {"name": name})
    show(added, as_json, lambda d: f"added pool {d['name']!r}")


@pool.command("list")
@json_option
@click.pass_context
def list_pools(ctx: click.Context, as_json: bool) -> None:
    """List pools with their systems and rules."""
    pools = api(ctx).get("/pools")

    def render(data: dict[str, Any]) -> Any:
        return table(
            ["pool", "systems", "access"],
            [
                [p["name"], cell(p["systems"]), cell(p["rules"]) if p["restricted"] else "open"]
                for p in data["pools"]
            ],
        )

    show(pools, as_json, render)


@pool.command("add-system")
@click.argument("pool_name", metavar="POOL")
@click.argument("fqdn")
@json_option
@click.pass_context
def add_system(ctx: click.Context, pool_name: str, fqdn: str, as_json: bool) -> None:
    """Put a system in a pool."""
    done = api(ctx).post(f"/pools/{pool_name}/systems", {"fqdn": fqdn})
    show(done, as_json, lambda d: f"{d['fqdn']} is in pool {d['pool']}")


@pool.command("remove-system")
@click.argument("pool_name", metavar="POOL")
@click.argument("fqdn")
@json_option
@click.pass_context
def remove_system(ctx: click.Context, pool_name: str, fqdn: str, as_json: bool) -> None:
    """Take a system out of a pool."""
    done = api(ctx).delete(f"/pools/{pool_name}/systems/{fqdn}")
    show(done, as_json, lambda d: f"{d['fqdn']} is not in pool {d['pool']}")


@pool.command("allow")
@click.argument("pool_name", metavar="POOL")
@click.argument("group")
@click.argument("max_priority")
@json_option
@click.pass_context
def allow(ctx: click.Context, pool_name: str, group: str, max_priority: str, as_json: bool) -> None:
    """Let GROUP use POOL up to MAX_PRIORITY (effective priority, seed 002)."""
    label = priority_label(max_priority, "MAX_PRIORITY")
    done = api(ctx).put(f"/pools/{pool_name}/rules/{group}", {"max_priority": label})
    show(done, as_json, lambda d: f"{d['group']} may use {d['pool']} up to {d['max_priority']}")


@pool.command("revoke")
@click.argument("pool_name", metavar="POOL")
@click.argument("group")
@json_option
@click.pass_context
def revoke(ctx: click.Context, pool_name: str, group: str, as_json: bool) -> None:
    """Remove GROUP's rule on POOL (the pool stays restricted)."""
    done = api(ctx).delete(f"/pools/{pool_name}/rules/{group}")
    show(done, as_json, lambda d: f"{d['group']} has no rule on {d['pool']} now")
