"""Commands that speak to a labq server over its HTTP API, one module per resource.

Shared here: how a command gets its :class:`~labq.client.Client`, the ``--json``
option, and printing (the API's JSON as is, or a Rich table).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from labq.client import Client
from labq.clisession import Session
from labq.terminal import output


def api(ctx: click.Context) -> Client:
    """The client of the running command."""
    session = ctx.find_object(Session)
    assert session is not None, "the labq group sets up a Session"
    return session.client()


json_option = click.option("--json", "as_json", is_flag=True, help="Print the API's JSON.")


def console() -> Console:
    """Where tables go: stdout, as wide as the terminal or ``COLUMNS``; piped, never cut."""
    return output()


def show(data: Any, as_json: bool, render: Callable[[Any], Any]) -> None:
    """Print ``data`` as JSON, or what ``render`` makes of it (text or a Rich renderable)."""
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=False))
        return
    out = render(data)
    if isinstance(out, str):
        click.echo(out)
    else:
        console().print(out)


def show_change(data: Any, as_json: bool, render: Callable[[Any], Any]) -> None:
    """``show`` the answer of a verb; when it changed nothing (the API's ``note`` says why),
    say why on stderr instead and exit 1: what was asked for did not happen."""
    note = data.get("note") if isinstance(data, dict) else None
    if note is None:
        show(data, as_json, render)
        return
    if as_json:
        show(data, as_json, render)
    click.echo(f"labq: {note}", err=True)
    raise click.exceptions.Exit(1)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None) -> Table:
    """A plain Rich table; ``None`` shows as ``-``."""
    grid = Table(title=title, show_edge=False, header_style="bold")
    for header in headers:
        grid.add_column(header)
    for row in rows:
        grid.add_row(*(cell(value) for value in row))
    return grid


def fields(data: dict[str, Any], keys: Sequence[str]) -> str:
    """``key: value`` lines for the keys present."""
    return "\n".join(f"{k}: {cell(data[k])}" for k in keys if k in data)


def cell(value: Any) -> str:
    """One value as a table or a field line shows it."""
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "-"
    return str(value)


def when(value: Any) -> str | None:
    """A time as a person reads it (UTC, to the second): ISO text or epoch seconds."""
    if value is None:
        return None
    if isinstance(value, int | float):
        moment = datetime.fromtimestamp(value, UTC)
    else:
        try:
            moment = datetime.fromisoformat(str(value))
        except ValueError:
            return str(value)
    return moment.strftime("%Y-%m-%d %H:%M:%S")
