"""``labq system``: add, list, show, set the inventory, change condition, usage history."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click
from rich.console import Group

from labq.commands import api, cell, fields, json_option, show, table, when
from labq.domain.states import Condition
from labq.errors import InputError

_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")


def attribute(text: str) -> tuple[str, str | int | float]:
    """``K=V``; V becomes an int or a float when it looks like one."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise InputError(f"an attribute is KEY=VALUE, not {text!r}", place="--attr")
    if _INTEGER.fullmatch(value):
        return key, int(value)
    if _NUMBER.fullmatch(value):
        return key, float(value)
    return key, value


@click.group()
def system() -> None:
    """Systems: the machines jobs run on (changes need an admin)."""


@system.command("add")
@click.argument("fqdn")
@click.option("--lab", required=True, help="The lab the system belongs to.")
@click.option("--arch", default=None, help="Architecture (default x86_64).")
@click.option("--attr", "attrs", multiple=True, metavar="K=V", help="An attribute; repeatable.")
@click.option("--pool", "pools", multiple=True, help="A pool to put it in; repeatable.")
@json_option
@click.pass_context
def add_system(
    ctx: click.Context,
    fqdn: str,
    lab: str,
    arch: str | None,
    attrs: tuple[str, ...],
    pools: tuple[str, ...],
    as_json: bool,
) -> None:
    """Add a system to a lab (automated: it is offered to the queue at once)."""
    body: dict[str, Any] = {"fqdn": fqdn, "lab": lab, "attributes": dict(map(attribute, attrs))}
    if arch is not None:
        body["arch"] = arch
    if pools:
        body["pools"] = list(pools)
    added = api(ctx).post("/systems", body)

    def render(d: dict[str, Any]) -> str:
        line = f"added {d['fqdn']} to lab {d['lab']} ({d['usage']})"
        where = d.get("runs_on")  # an older server says nothing of it
        return line if where is None else f"{line}\n{where['note']}"

    show(added, as_json, render)


@system.command("list")
@click.option("--lab", default=None, help="Only this lab's systems.")
@click.option("--pool", default=None, help="Only this pool's systems.")
@json_option
@click.pass_context
def list_systems(ctx: click.Context, lab: str | None, pool: str | None, as_json: bool) -> None:
    """List systems with their condition and usage."""
    systems = api(ctx).get("/systems", {"lab": lab, "pool": pool})

    def render(data: dict[str, Any]) -> Any:
        head = ["fqdn", "lab", "arch", "condition", "usage", "recipe", "pools", "attributes"]
        return table(
            head,
            [
                [
                    s["fqdn"],
                    s["lab"],
                    s["arch"],
                    s["condition"],
                    _usage(s),
                    s["recipe"],
                    cell(s["pools"]),
                    cell(s["attributes"]),
                ]
                for s in data["systems"]
            ],
        )

    show(systems, as_json, render)


def _usage(system: dict[str, Any]) -> str:
    """Its usage, or ``reserved by alice until …`` while someone holds it (issue 14)."""
    held = system.get("reservation")
    return str(system["usage"]) if held is None else str(held["text"])


@system.command("show")
@click.argument("fqdn")
@json_option
@click.pass_context
def show_system(ctx: click.Context, fqdn: str, as_json: bool) -> None:
    """Show one system."""
    found = api(ctx).get(f"/systems/{fqdn}")
    keys = ["fqdn", "lab", "arch", "owner", "condition", "condition_reason", "usage", "recipe"]

    def render(d: dict[str, Any]) -> str:
        head = fields(d, [*keys, "pools", "attributes"])
        return "\n".join([head, *inventory_lines(d.get("inventory") or {})])

    show(found, as_json, render)


def inventory_lines(inventory: dict[str, Any]) -> list[str]:
    """The inventory as ``labq system show`` prints it: one line per device and disk."""
    out = [f"last_inventoried: {inventory.get('last_inventoried') or 'never'}"]
    if "cpu_flags" in inventory:
        out.append(f"cpu_flags: {cell(inventory['cpu_flags'])}")
    for name in ("devices", "disks"):
        items = inventory.get(name)
        if items is None:
            continue
        out.append(f"{name}: {len(items)}")
        out.extend(f"  - {cell(item)}" for item in items)
    return out


@system.command("set")
@click.argument("fqdn")
@click.option(
    "--inventory",
    "inventory_file",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="A JSON file: devices, disks, cpu_flags, last_inventoried (replaces the old one).",
)
@click.option("--lab", default=None, help="Move it to this lab (not while it serves a recipe).")
@click.option("--arch", default=None, help="Its architecture.")
@click.option("--attr", "attrs", multiple=True, metavar="K=V", help="Set an attribute; repeatable.")
@click.option("--unset-attr", "unset", multiple=True, metavar="K", help="Drop an attribute.")
@click.option("--pool", "pools", multiple=True, help="Put it in this pool; repeatable.")
@click.option("--remove-pool", "leave", multiple=True, help="Take it out of this pool.")
@json_option
@click.pass_context
def set_system(
    ctx: click.Context,
    fqdn: str,
    inventory_file: Path | None,
    lab: str | None,
    arch: str | None,
    attrs: tuple[str, ...],
    unset: tuple[str, ...],
    pools: tuple[str, ...],
    leave: tuple[str, ...],
    as_json: bool,
) -> None:
    """Change a system: its lab, arch, attributes, pools, or what it is made of (its
    inventory, which host requirements read). Kept in its history."""
    body: dict[str, Any] = {}
    if inventory_file is not None:
        body["inventory"] = _read_inventory(inventory_file)
    if lab is not None:
        body["lab"] = lab
    if arch is not None:
        body["arch"] = arch
    attributes: dict[str, Any] = dict(map(attribute, attrs))
    for key in unset:
        if key in attributes:
            raise InputError(f"{key!r} is both set and unset", place="--unset-attr")
        attributes[key] = None
    if attributes:
        body["attributes"] = attributes
    if pools:
        body["add_pools"] = list(pools)
    if leave:
        body["remove_pools"] = list(leave)
    if not body:
        raise click.UsageError("say what to change: --inventory, --lab, --arch, --attr, --pool…")
    changed = api(ctx).patch(f"/systems/{fqdn}", body)

    def render(d: dict[str, Any]) -> str:
        if not d["changed"]:
            return f"{d['fqdn']} was so already"
        return f"{d['fqdn']}: {', '.join(d['fields'])} set"

    show(changed, as_json, render)


def _read_inventory(inventory_file: Path) -> Any:
    try:
        return json.loads(inventory_file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read it: {exc.strerror}", source=str(inventory_file)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        line = getattr(exc, "lineno", None)
        problem = getattr(exc, "msg", str(exc))
        raise InputError(f"not JSON: {problem}", source=str(inventory_file), line=line) from None


@system.command("condition")
@click.argument("fqdn")
@click.argument("condition", metavar="CONDITION")
@click.option("--reason", required=True, help="Why: kept with the change.")
@json_option
@click.pass_context
def set_condition(
    ctx: click.Context, fqdn: str, condition: str, reason: str, as_json: bool
) -> None:
    """Set a system's condition: automated, manual, broken or removed."""
    known = [c.value for c in Condition]
    if condition not in known:
        raise InputError(
            f"unknown condition {condition!r} (expected one of {', '.join(known)})",
            place="CONDITION",
        )
    changed = api(ctx).post(
        f"/systems/{fqdn}/condition", {"condition": condition, "reason": reason}
    )

    def render(d: dict[str, Any]) -> str:
        if not d["changed"]:
            return f"{d['fqdn']} was {d['condition']} already"
        return f"{d['fqdn']} is now {d['condition']} ({d['usage']})"

    show(changed, as_json, render)


@system.command("history")
@click.argument("fqdn")
@json_option
@click.pass_context
def history(ctx: click.Context, fqdn: str, as_json: bool) -> None:
    """A system's usage and condition history, oldest first."""
    rows = api(ctx).get(f"/systems/{fqdn}/history")

    def render(data: dict[str, Any]) -> Any:
        usage = table(
            ["usage", "condition", "recipe", "start", "end"],
            [
                [r["usage"], r["condition"], r["recipe"], when(r["start"]), when(r["end"])]
                for r in data["history"]
            ],
        )
        changes = table(
            ["at", "by", "change", "old", "new", "reason"],
            [
                [when(c["at"]), c["actor"], c["action"], c["old"], c["new"], c["reason"]]
                for c in data.get("changes", [])
            ],
            title="changes",
        )
        return Group(usage, "", changes)

    show(rows, as_json, render)
