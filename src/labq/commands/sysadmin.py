"""``labq system remove`` and ``labq system summary`` (Slurm's ``sinfo``)."""

from __future__ import annotations

from typing import Any

import click

from labq.commands import api, json_option, show, table
from labq.commands.systems import system


@system.command("remove")
@click.argument("fqdn")
@click.option("--force", is_flag=True, help="Also when it serves a recipe: that recipe aborts.")
@click.option("--reason", default=None, help="Why: kept in its history.")
@json_option
@click.pass_context
def remove_system(
    ctx: click.Context, fqdn: str, force: bool, reason: str | None, as_json: bool
) -> None:
    """Take a system out of service for good (its history stays); admins only."""
    body: dict[str, Any] = {"force": force}
    if reason is not None:
        body["reason"] = reason
    done = api(ctx).post(f"/systems/{fqdn}/remove", body)

    def render(d: dict[str, Any]) -> str:
        if not d["changed"]:
            return f"{d['fqdn']} was removed already"
        if d["aborted_set"] is not None:
            return f"removed {d['fqdn']}; recipe {d['recipe']} (set {d['aborted_set']}) aborts"
        if d["recipe"] is not None:
            return f"removed {d['fqdn']}; recipe {d['recipe']} will be placed elsewhere"
        return f"removed {d['fqdn']}"

    show(done, as_json, render)


@system.command("summary")
@click.option("--lab", default=None, help="Only this lab.")
@json_option
@click.pass_context
def summary(ctx: click.Context, lab: str | None, as_json: bool) -> None:
    """Per lab and pool: how many systems are idle, held, running, broken, manual, reserved."""
    found = api(ctx).get("/systems/summary", {"lab": lab})

    def render(d: dict[str, Any]) -> Any:
        columns = d["columns"]
        rows = []
        for entry in d["labs"]:
            rows.append([entry["lab"], "(all)", *(entry[c] for c in columns)])
            rows.extend(
                [entry["lab"], p["pool"] or "(no pool)", *(p[c] for c in columns)]
                for p in entry["pools"]
            )
        return table(["lab", "pool", *columns], rows, title=None if rows else "no systems")

    show(found, as_json, render)
