"""``labq filter`` (queue filter rules) and ``labq queue`` with ``pause``/``resume``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from labq.commands import api, cell, json_option, show, table, when
from labq.commands.durations import parse_duration
from labq.commands.jobs import queue as show_queue
from labq.commands.jobs import queue_filters
from labq.domain import filters
from labq.errors import InputError


@click.group("filter")
def filter_group() -> None:
    """Queue filter rules: accept, continue, pause, reject or rate-limit matching jobs."""


@filter_group.command("add")
@click.option(
    "--action",
    required=True,
    type=click.Choice(filters.ACTIONS),
    help="What a matching job gets.",
)
@click.option("--rate", type=int, default=None, help="With rate-limit: how many run at once.")
@click.option(
    "--priority", type=int, default=0, show_default=True, help="Lower rules are tried first."
)
@click.option(
    "--match",
    "matches",
    multiple=True,
    metavar="FIELD OP VALUE",
    help="A predicate (all must hold): owner=alice, group!=qe, job>=12, whiteboard~nightly*.",
)
@click.option("--comment", default=None, help="Why; quoted in the reasons people see.")
@json_option
@click.pass_context
def add(
    ctx: click.Context,
    action: str,
    rate: int | None,
    priority: int,
    matches: tuple[str, ...],
    comment: str | None,
    as_json: bool,
) -> None:
    """Add a rule (admins). Sets that have not started are judged again at once."""
    for text in matches:
        try:
            filters.parse_predicate(text)
        except filters.FilterError as exc:
            raise InputError(str(exc), place="--match") from None
    body: dict[str, Any] = {"action": action, "priority": priority, "predicates": list(matches)}
    if rate is not None:
        body["rate"] = rate
    if comment is not None:
        body["comment"] = comment
    created = api(ctx).post("/filters", body)
    show(created, as_json, lambda d: f"added filter {d['id']}: {_rule_text(d)}")


@filter_group.command("list")
@json_option
@click.pass_context
def list_filters(ctx: click.Context, as_json: bool) -> None:
    """Every rule, in the order they are tried."""
    found = api(ctx).get("/filters")

    def render(d: dict[str, Any]) -> Any:
        rows = [
            [
                f["id"],
                f["priority"],
                f["action"] if f["rate"] is None else f"rate-limit {f['rate']}",
                " ".join(f["predicates"]) or "every job",
                f["comment"],
                f["created_by"],
                when(f["created_at"]),
            ]
            for f in d["filters"]
        ]
        headers = ["id", "priority", "action", "matches", "comment", "by", "created"]
        return table(headers, rows, title=None if rows else "no filter rules")

    show(found, as_json, render)


@filter_group.command("delete")
@click.argument("filter_id", metavar="ID", type=int)
@json_option
@click.pass_context
def delete(ctx: click.Context, filter_id: int, as_json: bool) -> None:
    """Remove a rule (admins); the sets it held or limited are judged again."""
    done = api(ctx).delete(f"/filters/{filter_id}")
    show(done, as_json, lambda d: f"deleted filter {d['id']}")


@click.group("queue", invoke_without_command=True)
@queue_filters
@json_option
@click.pass_context
def queue(ctx: click.Context, /, as_json: bool, **filters: str | None) -> None:
    """The queued recipe sets in scheduling order; pause and resume a lab's queue."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(show_queue, as_json=as_json, **filters)


@queue.command("pause")
@click.argument("lab")
@click.option("--for", "duration", default=None, help="For how long: 90s, 30m, 2h, 1d, 1h30m.")
@click.option("--until", default=None, help="Until when: ISO 8601 (no zone: local time).")
@click.option("--reason", default=None, help="Why (shown with the pause).")
@json_option
@click.pass_context
def pause(
    ctx: click.Context,
    lab: str,
    duration: str | None,
    until: str | None,
    reason: str | None,
    as_json: bool,
) -> None:
    """Pause LAB's queue (admins): nothing new starts there; what runs goes on."""
    if duration is not None and until is not None:
        raise InputError("give --for or --until, not both", place="--for")
    body: dict[str, Any] = {"lab": lab}
    if duration is not None:
        body["for_s"] = parse_duration(duration)
    if until is not None:
        body["until"] = _aware(until)
    if reason is not None:
        body["reason"] = reason
    done = api(ctx).post("/queue/pause", body)
    show(done, as_json, _paused_text)


@queue.command("resume")
@click.argument("lab")
@json_option
@click.pass_context
def resume(ctx: click.Context, lab: str, as_json: bool) -> None:
    """Let LAB's queue move again (admins)."""
    done = api(ctx).post("/queue/resume", {"lab": lab})
    show(
        done,
        as_json,
        lambda d: f"resumed {d['lab']}" if d["resumed"] else f"{d['lab']} was not paused",
    )


@queue.command("pauses")
@json_option
@click.pass_context
def list_pauses(ctx: click.Context, as_json: bool) -> None:
    """The labs whose queue is paused now."""
    found = api(ctx).get("/queue/pauses")

    def render(d: dict[str, Any]) -> Any:
        rows = [
            [p["lab"], when(p["since"]), when(p["until"]) or "resumed", p["reason"], p["paused_by"]]
            for p in d["pauses"]
        ]
        headers = ["lab", "since", "until", "reason", "by"]
        return table(headers, rows, title=None if rows else "no lab queue is paused")

    show(found, as_json, render)


def _aware(text: str) -> str:
    """An ISO time with its zone; one without is taken as local time."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"{text!r} is not an ISO 8601 time", place="--until") from None
    return (moment if moment.tzinfo is not None else moment.astimezone()).isoformat()


def _rule_text(rule: dict[str, Any]) -> str:
    action = rule["action"] if rule["rate"] is None else f"rate-limit {rule['rate']}"
    where = " ".join(rule["predicates"]) or "every job"
    return f"{action} if {where} (priority {rule['priority']})"


def _paused_text(pause: dict[str, Any]) -> str:
    until = f" until {when(pause['until'])} UTC" if pause["until"] else " until resumed"
    why = f" ({cell(pause['reason'])})" if pause["reason"] else ""
    return f"paused {pause['lab']}{until}{why}"
