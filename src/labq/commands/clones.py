"""``labq job source`` and ``labq job clone`` (Beaker's ``bkr job-clone``)."""

from __future__ import annotations

from typing import Any

import click

from labq.commands import api, json_option, show
from labq.commands.jobs import job
from labq.commands.pools import priority_label
from labq.commands.waiting import follow


@job.command("source")
@click.argument("job_id", metavar="ID", type=int)
@json_option
@click.pass_context
def source(ctx: click.Context, job_id: int, as_json: bool) -> None:
    """Print the document a job was submitted as (its canonical JSON if none was kept)."""
    text = api(ctx).get_text(f"/jobs/{job_id}/source")
    if as_json:
        show({"id": job_id, "document": text}, True, str)
    else:
        click.echo(text, nl=not text.endswith("\n"))


@job.command("clone")
@click.argument("job_id", metavar="ID", type=int)
@click.option("--priority", default=None, help="Priority of every set of the clone.")
@click.option("--group", default=None, help="The clone's group (everybody: no group).")
@click.option("--whiteboard", default=None, help="The clone's whiteboard ('' clears it).")
@click.option(
    "--wait",
    is_flag=True,
    help="Follow the clone; exit 0 if it passes, 1 if not (--json: its results at the end).",
)
@json_option
@click.pass_context
def clone(
    ctx: click.Context,
    job_id: int,
    priority: str | None,
    group: str | None,
    whiteboard: str | None,
    wait: bool,
    as_json: bool,
) -> None:
    """Submit a job again, as yours, from the document it was submitted as."""
    body: dict[str, Any] = {}
    if priority is not None:
        body["priority"] = priority_label(priority, "--priority")
    if group is not None:
        body["group"] = group
    if whiteboard is not None:
        body["whiteboard"] = whiteboard
    client = api(ctx)
    created = client.post(f"/jobs/{job_id}/clone", body)
    said = f"submitted job {created['id']}, a clone of job {created['cloned_from']}"
    if not wait:
        show(created, as_json, lambda _: said)
        return
    if not as_json:
        click.echo(said)
    if not follow(client, int(created["id"]), as_json=as_json):
        raise click.exceptions.Exit(1)
