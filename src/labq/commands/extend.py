"""``labq job extend ID --by DURATION [--set N]`` (Beaker's ``bkr watchdog-extend``)."""

from __future__ import annotations

from typing import Any

import click

from labq.commands import api, json_option, show
from labq.commands.durations import parse_duration
from labq.commands.jobs import job
from labq.errors import InputError


def _seconds(ctx: click.Context, param: click.Parameter, value: str) -> int:
    """``90s``, ``30m``, ``2h``, ``1d``, ``1h30m`` or plain seconds, as whole seconds."""
    try:
        return max(1, round(parse_duration(value)))
    except InputError as exc:
        raise click.BadParameter(exc.problem, ctx, param) from None


@job.command("extend")
@click.argument("job_id", metavar="ID", type=int)
@click.option(
    "--by",
    "by",
    metavar="DURATION",
    required=True,
    callback=_seconds,
    help="How much longer (e.g. 30m, 2h).",
)
@click.option(
    "--set", "set_id", type=click.IntRange(min=1), default=None, help="Only this recipe set."
)
@json_option
@click.pass_context
def extend(ctx: click.Context, job_id: int, by: int, set_id: int | None, as_json: bool) -> None:
    """Give a job's running sets more time: move their max_time deadline by DURATION."""
    body: dict[str, Any] = {"by": by}
    if set_id is not None:
        body["set"] = set_id
    done = api(ctx).post(f"/jobs/{job_id}/extend", body)

    def render(d: dict[str, Any]) -> str:
        return "\n".join(
            f"set {s['id']}: max_time now {s['max_time']} s ({s['extended']} s extended in all)"
            for s in d["sets"]
        )

    show(done, as_json, render)
