"""``labq logs prune`` (admins) and ``labq job retention ID``."""

from __future__ import annotations

from typing import Any

import click

from labq.commands import api, json_option, show, table, when
from labq.commands.jobs import job
from labq.terminal import shows_progress, working


@click.group("logs")
def logs_group() -> None:
    """Logs kept by retention tag (Beaker's retention_tag)."""


@logs_group.command("prune")
@json_option
@click.pass_context
def prune_logs(ctx: click.Context, as_json: bool) -> None:
    """Delete the logs of every job whose retention has run out, now (admins)."""
    with working("deleting expired logs", shows_progress(as_json)):
        done = api(ctx).post("/logs/prune")

    def render(d: dict[str, Any]) -> Any:
        if not d["pruned"]:
            return "no logs are due for deletion"
        return table(
            ["job", "tag", "files", "bytes"],
            [[p["job"], p["tag"], p["files"], p["bytes"]] for p in d["pruned"]],
            title=f"deleted the logs of {len(d['pruned'])} jobs",
        )

    show(done, as_json, render)


@job.command("retention")
@click.argument("job_id", metavar="ID", type=click.IntRange(min=1))
@json_option
@click.pass_context
def job_retention(ctx: click.Context, job_id: int, as_json: bool) -> None:
    """A job's retention tag, and when its logs expire or were deleted."""
    found = api(ctx).get(f"/jobs/{job_id}/retention")
    show(found, as_json, retention_line)


def retention_line(d: dict[str, Any]) -> str:
    """One line: ``job 7: tag scratch (30 days): logs deleted on …`` and the like."""
    days = d["lifetime_days"]
    kept = "kept forever" if days is None else f"{days:g} days"
    head = f"job {d['id']}: tag {d['tag']} ({kept if d['known_tag'] else 'unknown tag: kept'})"
    if d["deleted_at"] is not None:
        return f"{head}: logs deleted on {when(d['deleted_at'])}"
    if d["ended_at"] is None:
        return f"{head}: running; kept until it ends and after"
    if d["expires_at"] is None:
        return f"{head}: logs kept"
    return f"{head}: logs kept until {when(d['expires_at'])}"
