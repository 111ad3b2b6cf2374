"""``labq lab``: add and list labs."""

from __future__ import annotations

from typing import Any

import click

from labq.commands import api, json_option, show, table


@click.group()
def lab() -> None:
    """Labs: groups of systems that share provisioning (adding needs an admin)."""


@lab.command("add")
@click.argument("name")
@json_option
@click.pass_context
def add_lab(ctx: click.Context, name: str, as_json: bool) -> None:
    """Add a lab."""
    added = api(ctx).post("/labs", {"name": name})
    show(added, as_json, lambda d: f"added lab {d['name']!r}")


@lab.command("list")
@json_option
@click.pass_context
def list_labs(ctx: click.Context, as_json: bool) -> None:
    """List the labs."""
    labs = api(ctx).get("/labs")

    def render(data: dict[str, Any]) -> Any:
        return table(["lab"], [[row["name"]] for row in data["labs"]])

    show(labs, as_json, render)
