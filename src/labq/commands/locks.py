"""``labq lock``: take and release locks for a running recipe set (run inside its tasks).

A task finds the server and its set's own token in ``LABQ_URL`` and
``LABQ_TOKEN``. ``acquire`` takes every lock it names or none; with
``--wait`` it keeps its place in the queue, asking again every second,
until it gets them (or ``--timeout`` passes: exit 1).
"""

from __future__ import annotations

import time
from typing import Any

import click

from labq.commands import api, json_option, show, table

POLL_EVERY = 1.0


def _refs(locks: tuple[str, ...], exclusive: bool) -> list[dict[str, Any]]:
    out = []
    for text in locks:
        level, sep, name = text.partition(":")
        if not sep or not level or not name:
            raise click.BadParameter(
                f"{text!r}: expected LEVEL:NAME, like storage:nfs1", param_hint="LOCK"
            )
        out.append({"level": level, "name": name, "exclusive": exclusive})
    return out


@click.group()
def lock() -> None:
    """Shared and exclusive locks on lab resources, for a running recipe set."""


@lock.command("acquire")
@click.argument("locks", nargs=-1, required=True, metavar="LEVEL:NAME...")
@click.option("--exclusive", is_flag=True, help="Take them exclusively (default: shared).")
@click.option("--wait", is_flag=True, help="Wait in the queue until they are free.")
@click.option("--timeout", type=float, default=None, help="With --wait: give up after SECONDS.")
@click.option("--set", "set_id", type=int, default=None, help="The set (admins only).")
@json_option
@click.pass_context
def acquire(
    ctx: click.Context,
    locks: tuple[str, ...],
    exclusive: bool,
    wait: bool,
    timeout: float | None,
    set_id: int | None,
    as_json: bool,
) -> None:
    """Take every lock named, all together; exit 1 when they are not free (or time runs out)."""
    body = {"locks": _refs(locks, exclusive), "wait": wait, "set": set_id}
    deadline = None if timeout is None else time.monotonic() + timeout
    told = False
    while True:
        answer = api(ctx).post("/locks/acquire", body)
        if answer["granted"]:
            show(answer, as_json, lambda a: f"set {a['set']} holds: " + _names(a["held"]))
            return
        if not told:
            click.echo("waiting: " + "; ".join(answer["waiting_on"]), err=True)
            told = True
        if deadline is not None and time.monotonic() >= deadline:
            click.echo(f"labq: gave up after {timeout:g} s", err=True)
            ctx.exit(1)
        time.sleep(POLL_EVERY)


@lock.command("release")
@click.argument("locks", nargs=-1, metavar="[LEVEL:NAME...]")
@click.option("--exclusive", is_flag=True, help="The named locks were taken exclusively.")
@click.option("--all", "everything", is_flag=True, help="Release every lock the set holds.")
@click.option("--set", "set_id", type=int, default=None, help="The set (admins only).")
@json_option
@click.pass_context
def release(
    ctx: click.Context,
    locks: tuple[str, ...],
    exclusive: bool,
    everything: bool,
    set_id: int | None,
    as_json: bool,
) -> None:
    """Let go of locks (they are let go of anyway when the set ends)."""
    if not locks and not everything:
        raise click.UsageError("name the locks to release, or pass --all")
    body = {"locks": _refs(locks, exclusive), "all": everything, "set": set_id}
    answer = api(ctx).post("/locks/release", body)
    show(answer, as_json, lambda a: f"set {a['set']} holds: " + (_names(a["held"]) or "nothing"))


@lock.command("list")
@json_option
@click.pass_context
def list_locks(ctx: click.Context, as_json: bool) -> None:
    """Who holds which lock, and who waits for what."""
    data = api(ctx).get("/locks")

    def render(d: dict[str, Any]) -> Any:
        rows = [
            [h["set"], f"{h['level']}:{h['name']}", _mode(h), "held", ""] for h in d["held"]
        ] + [
            [
                w["set"],
                _names(w["locks"]),
                "",
                f"waiting since {w['since']}",
                "; ".join(w["waiting_on"]),
            ]
            for w in d["waiting"]
        ]
        headers = ["set", "lock", "mode", "state", "waiting on"]
        return table(headers, rows, title=None if rows else "no locks are held")

    show(data, as_json, render)


def _mode(grant: dict[str, Any]) -> str:
    return "exclusive" if grant["exclusive"] else "shared"


def _names(grants: list[dict[str, Any]]) -> str:
    return ", ".join(f"{g['level']}:{g['name']} ({_mode(g)})" for g in grants)
