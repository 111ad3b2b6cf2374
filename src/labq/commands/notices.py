"""``labq webhook`` (where job ends are POSTed) and ``labq job notifications ID``."""

from __future__ import annotations

from typing import Any

import click

from labq.commands import api, json_option, show, table, when
from labq.commands.jobs import job


@click.group()
def webhook() -> None:
    """Webhooks: job ends POSTed as signed JSON, for your jobs or a group's."""


@webhook.command("add")
@click.argument("url")
@click.option("--user", default=None, help="Whose jobs (default: yours; others: admins).")
@click.option("--group", default=None, help="A group's jobs instead (its members).")
@json_option
@click.pass_context
def add_webhook(
    ctx: click.Context, url: str, user: str | None, group: str | None, as_json: bool
) -> None:
    """Add a webhook; its signing secret is printed this once."""
    body: dict[str, Any] = {"url": url}
    if user is not None:
        body["user"] = user
    if group is not None:
        body["group"] = group
    added = api(ctx).post("/webhooks", body)

    def render(d: dict[str, Any]) -> str:
        whose = f"group {d['group']}" if d["group"] else f"user {d['user']}"
        return (
            f"webhook {d['id']} posts the ends of the jobs of {whose} to {d['url']}\n"
            f"secret (shown once; it signs X-Labq-Signature): {d['secret']}"
        )

    show(added, as_json, render)


@webhook.command("list")
@json_option
@click.pass_context
def list_webhooks(ctx: click.Context, as_json: bool) -> None:
    """List your webhooks and your groups' (an admin: every one)."""
    hooks = api(ctx).get("/webhooks")

    def render(d: dict[str, Any]) -> Any:
        return table(
            ["id", "user", "group", "url", "added by", "added"],
            [
                [h["id"], h["user"], h["group"], h["url"], h["created_by"], when(h["created_at"])]
                for h in d["webhooks"]
            ],
        )

    show(hooks, as_json, render)


@webhook.command("remove")
@click.argument("hook_id", metavar="ID", type=click.IntRange(min=1))
@json_option
@click.pass_context
def remove_webhook(ctx: click.Context, hook_id: int, as_json: bool) -> None:
    """Remove a webhook."""
    done = api(ctx).delete(f"/webhooks/{hook_id}")
    show(done, as_json, lambda d: f"removed webhook {d['id']}")


@job.command("notifications")
@click.argument("job_id", metavar="ID", type=click.IntRange(min=1))
@json_option
@click.pass_context
def job_notifications(ctx: click.Context, job_id: int, as_json: bool) -> None:
    """What a job's end sent: each email and webhook POST, and why one failed."""
    found = api(ctx).get(f"/jobs/{job_id}/notifications")

    def render(d: dict[str, Any]) -> Any:
        if not d["notifications"]:
            return f"job {d['id']}: no notifications (yet)"
        return table(
            ["kind", "to", "state", "tries", "sent", "next try", "last error"],
            [
                [
                    n["kind"],
                    n["target"],
                    n["state"],
                    n["attempts"],
                    when(n["sent_at"]),
                    when(n["next_at"]),
                    n["last_error"],
                ]
                for n in d["notifications"]
            ],
            title=f"job {d['id']}",
        )

    show(found, as_json, render)
