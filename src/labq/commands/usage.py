"""``labq usage``: accounting per user, group, pool or lab (Slurm's ``sacct``/``sreport``)."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import click

from labq.commands import api, json_option, show, table

_AGO: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
COLUMNS: Final = ("key", "system_hours", "jobs", "recipes", "pass_rate", "mean_wait_s")


def moment(text: str | None, place: str) -> str | None:
    """An ISO time (a zone-less one is local time) or ``7d`` (that long ago), as ISO text."""
    if text is None:
        return None
    ago = _AGO.match(text.lower())
    if ago:
        seconds = float(ago.group(1)) * _UNIT[ago.group(2)]
        return (datetime.now(UTC) - timedelta(seconds=seconds)).isoformat()
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is neither an ISO 8601 time nor an age like 7d or 12h", param_hint=place
        ) from None
    return (parsed if parsed.tzinfo is not None else parsed.astimezone()).isoformat()


def as_csv(data: dict[str, Any]) -> str:
    """The rows as CSV, with a header line."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([data["by"], *COLUMNS[1:]])
    for row in data["rows"]:
        writer.writerow(["" if row[c] is None else row[c] for c in COLUMNS])
    return out.getvalue().rstrip("\n")


def _render(data: dict[str, Any]) -> Any:
    rows = [
        [
            r["key"],
            f"{r['system_hours']:.2f}",
            r["jobs"],
            r["recipes"],
            None if r["pass_rate"] is None else f"{100 * r['pass_rate']:.0f}%",
            None if r["mean_wait_s"] is None else _wait(r["mean_wait_s"]),
        ]
        for r in data["rows"]
    ]
    title = f"usage by {data['by']}, {data['since']} to {data['until']}"
    headers = [data["by"], "system-hours", "jobs", "recipes", "pass rate", "mean wait"]
    return table(headers, rows, title=title if rows else f"{title}: nothing ran")


def _wait(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


@click.command("usage")
@click.option(
    "--by",
    type=click.Choice(["user", "group", "pool", "lab"]),
    default="group",
    show_default=True,
    help="What each row is.",
)
@click.option("--since", help="Start: an ISO time, or an age like 7d (default: 30 days ago).")
@click.option("--until", help="End: an ISO time, or an age like 1d (default: now).")
@click.option("--csv", "as_csv_", is_flag=True, help="Print CSV (for spreadsheets).")
@json_option
@click.pass_context
def usage(
    ctx: click.Context,
    by: str,
    since: str | None,
    until: str | None,
    as_csv_: bool,
    as_json: bool,
) -> None:
    """System-hours used, jobs run, pass rate and mean wait per user, group, pool or lab."""
    params = {"by": by, "since": moment(since, "--since"), "until": moment(until, "--until")}
    found = api(ctx).get("/usage", params)
    if as_csv_:
        click.echo(as_csv(found))
        return
    show(found, as_json, _render)
