"""``labq system reserve|loan|release|reservations`` (issue 14: Beaker's system-reserve, loans)."""

from __future__ import annotations

from typing import Any

import click

from labq.commands import api, cell, json_option, show, table, when
from labq.commands.durations import parse_duration
from labq.commands.systems import system


def _seconds(text: str | None) -> int | None:
    return None if text is None else max(1, round(parse_duration(text)))


@system.command("reserve")
@click.argument("fqdn")
@click.option("--for", "duration", default=None, help="How long to keep it (90m, 2h, 1d; 1d).")
@json_option
@click.pass_context
def reserve(ctx: click.Context, fqdn: str, duration: str | None, as_json: bool) -> None:
    """Reserve a system for yourself: queued like a job pinned to it, then yours until released
    or the time runs out."""
    body: dict[str, Any] = {}
    seconds = _seconds(duration)
    if seconds is not None:
        body["for"] = seconds
    queued = api(ctx).post(f"/systems/{fqdn}/reserve", body)
    show(
        queued,
        as_json,
        lambda d: (
            f"reservation of {d['fqdn']} queued as job {d['job']}"
            f" (yours for {d['for']} s once it runs; see labq job show {d['job']})"
        ),
    )


@system.command("loan")
@click.argument("fqdn")
@click.option("--to", "to", required=True, help="The user who gets the system.")
@click.option("--for", "duration", default=None, help="How long (90m, 2h, 1d; until released).")
@click.option("--reason", default=None, help="Why (shown with the loan).")
@json_option
@click.pass_context
def loan(
    ctx: click.Context,
    fqdn: str,
    to: str,
    duration: str | None,
    reason: str | None,
    as_json: bool,
) -> None:
    """Loan a system to a user (admins): nobody else's jobs get it until it is released."""
    body: dict[str, Any] = {"to": to}
    seconds = _seconds(duration)
    if seconds is not None:
        body["for"] = seconds
    if reason is not None:
        body["reason"] = reason
    found = api(ctx).post(f"/systems/{fqdn}/loan", body)
    show(found, as_json, lambda d: f"{d['fqdn']} is {d['text']}")


@system.command("release")
@click.argument("fqdn")
@json_option
@click.pass_context
def release(ctx: click.Context, fqdn: str, as_json: bool) -> None:
    """End a system's reservation or loan (its holder or an admin): the queue gets it again."""
    found = api(ctx).post(f"/systems/{fqdn}/release")
    show(found, as_json, lambda d: f"released {d['fqdn']} (was {d['text']})")


@system.command("reservations")
@json_option
@click.pass_context
def reservations(ctx: click.Context, as_json: bool) -> None:
    """List the systems reserved or loaned now, with whose and until when."""
    found = api(ctx).get("/reservations")

    def render(d: dict[str, Any]) -> Any:
        rows = [
            [
                r["fqdn"],
                r["kind"],
                r["holder"],
                when(r["since"]),
                when(r["until"]) or "released",
                cell(r["recipe"]),
            ]
            for r in d["reservations"]
        ]
        title = None if rows else "no system is reserved or loaned"
        return table(["fqdn", "kind", "holder", "since", "until", "recipe"], rows, title=title)

    show(found, as_json, render)
