"""``labq job`` and ``labq queue``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

import click
from rich.console import Group
from rich.text import Text

from labq.client import ServerError
from labq.commands import api, cell, fields, json_option, show, table, when
from labq.commands.pools import priority_label
from labq.commands.runs import submit_run
from labq.commands.waiting import follow
from labq.domain.states import RecipeState
from labq.errors import LabqError
from labq.formats.loader import FORMATS, Format, load_job
from labq.formats.source import read_document

CONTENT_TYPES: Final = {".xml": "application/xml", ".json": "application/json"}
_SERVER_SOURCE = re.compile(r"^job:(\d+): ")


@click.group()
def job() -> None:
    """Jobs: submit, follow, list, show, cancel, results, logs, priority."""


@job.command("submit")
@click.argument(
    "files",
    metavar="FILE...",
    nargs=-1,
    required=True,
    type=click.Path(dir_okay=False, allow_dash=False),
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="auto",
    show_default=True,
    help="Job format; auto tells XML (Beaker) from Teuthology and native YAML/JSON.",
)
@click.option(
    "--run",
    "run_name",
    default=None,
    help="Submit the files as one run of this name (all or none are stored).",
)
@click.option(
    "--wait",
    is_flag=True,
    help="Follow the job; exit 0 if it passes, 1 if not (--json: its results at the end).",
)
@json_option
@click.pass_context
def submit(
    ctx: click.Context,
    files: tuple[str, ...],
    fmt: Format,
    run_name: str | None,
    wait: bool,
    as_json: bool,
) -> None:
    """Submit job files; checked here first, so a bad one names the file, line and place."""
    for file in files:
        load_job(file, fmt=fmt)  # the same message as `labq validate`, before anything is sent
    if run_name is not None:
        if wait:
            raise click.UsageError("--wait follows one job; follow a run with `labq run show`")
        documents = [
            {"name": file, "document": read_document(file), "format": fmt} for file in files
        ]
        created = submit_run(ctx, run_name, documents, {"files": list(files)})
        show(created, as_json, lambda d: f"submitted run {d['name']}: jobs {cell(d['jobs'])}")
        return
    if len(files) > 1:
        raise click.UsageError("several files are submitted together with --run NAME")
    _submit_one(ctx, files[0], fmt, wait, as_json)


def _submit_one(ctx: click.Context, file: str, fmt: Format, wait: bool, as_json: bool) -> None:
    document = Path(file).read_bytes()
    content_type = CONTENT_TYPES.get(Path(file).suffix.lower(), "application/yaml")
    client = api(ctx)
    try:
        created = client.submit(document, content_type=content_type, fmt=fmt)
    except ServerError as exc:
        # the server calls the document "job"; the person knows it by its file name
        raise LabqError(_SERVER_SOURCE.sub(rf"{file}:\1: ", exc.message)) from None
    if not wait:
        show(created, as_json, lambda d: f"submitted job {d['id']} ({d['format']})")
        return
    if not as_json:
        click.echo(f"submitted job {created['id']} ({created['format']})")
    if not follow(client, int(created["id"]), as_json=as_json):
        raise click.exceptions.Exit(1)


@job.command("list")
@click.option("--owner", default=None, help="Only this user's jobs.")
@click.option("--group", default=None, help="Only this group's jobs.")
@click.option(
    "--state", type=click.Choice([s.value for s in RecipeState]), default=None, help="Job state."
)
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True)
@json_option
@click.pass_context
def list_jobs(
    ctx: click.Context,
    owner: str | None,
    group: str | None,
    state: str | None,
    limit: int,
    offset: int,
    as_json: bool,
) -> None:
    """List jobs, newest first."""
    params = {"owner": owner, "group": group, "state": state, "limit": limit, "offset": offset}
    page = api(ctx).get("/jobs", params)

    def render(data: dict[str, Any]) -> Any:
        jobs = data["jobs"]
        title = f"jobs {offset + 1}-{offset + len(jobs)} of {data['total']}" if jobs else "no jobs"
        return table(
            ["id", "owner", "group", "state", "result", "submitted", "whiteboard"],
            [
                [
                    j["id"],
                    j["owner"],
                    j["group"],
                    j["state"],
                    j["result"],
                    when(j["submitted_at"]),
                    j["whiteboard"],
                ]
                for j in jobs
            ],
            title=title,
        )

    show(page, as_json, render)


@job.command("show")
@click.argument("job_id", metavar="ID", type=int)
@json_option
@click.pass_context
def show_job(ctx: click.Context, job_id: int, as_json: bool) -> None:
    """Show a job: every recipe set (retries too), recipe and task."""
    found = api(ctx).get(f"/jobs/{job_id}")

    def render(d: dict[str, Any]) -> Any:
        head = fields(
            d,
            [
                "id",
                "owner",
                "group",
                "whiteboard",
                "state",
                "result",
                "submitted_at",
                "cloned_from",
            ],
        )
        rows = [
            [
                s["id"],
                s["attempt"],
                s["priority"],
                r["id"],
                r["role"],
                r["system"],
                r["state"],
                r["result"],
                cell([t["name"] for t in r["tasks"]]),
            ]
            for s in d["sets"]
            for r in s["recipes"]
        ]
        headers = ["set", "attempt", "priority", "recipe", "role", "system", "state", "result"]
        return Group(head, "", table([*headers, "tasks"], rows), *set_notes(d["sets"]))

    show(found, as_json, render)


def set_notes(sets: list[dict[str, Any]]) -> list[Text]:
    """One line per set that was stopped or carries an error: why, in plain words."""
    notes = []
    for rset in sets:
        if rset["stop_reason"]:
            notes.append(Text(f"set {rset['id']} stopped: {rset['stop_reason']}"))
        if rset["error"]:
            notes.append(Text(f"set {rset['id']}: {rset['error']}"))
    return notes


@job.command("cancel")
@click.argument("job_id", metavar="ID", type=int)
@click.option("--reason", default=None, help="Why (kept with the job).")
@json_option
@click.pass_context
def cancel(ctx: click.Context, job_id: int, reason: str | None, as_json: bool) -> None:
    """Cancel every unfinished recipe of a job."""
    done = api(ctx).post(f"/jobs/{job_id}/cancel", {"reason": reason} if reason else None)
    show(done, as_json, lambda d: f"job {d['id']}: {d['cancelled']} recipe(s) cancelled")


@job.command("results")
@click.argument("job_id", metavar="ID", type=int)
@json_option
@click.pass_context
def results(ctx: click.Context, job_id: int, as_json: bool) -> None:
    """The result of every recipe and task."""
    found = api(ctx).get(f"/jobs/{job_id}/results")

    def render(d: dict[str, Any]) -> Any:
        rows = [
            [
                s["id"],
                r["id"],
                # a guest recipe's task shows under its host
                f"{r['system']} › guest {t['guest']}" if t.get("guest") else r["system"],
                t["name"],
                t["status"],
                t["result"],
                t["exit_code"],
                t["message"],
            ]
            for s in d["sets"]
            for r in s["recipes"]
            for t in r["tasks"]
        ]
        title = f"job {d['id']}: {d['state']}, {d['result'] or 'no result yet'}"
        headers = ["set", "recipe", "system", "task", "status", "result", "exit", "message"]
        return Group(table(headers, rows, title=title), *set_notes(d["sets"]))

    show(found, as_json, render)


@job.command("logs")
@click.argument("job_id", metavar="ID", type=int)
@click.argument("path", required=False)
@json_option
@click.pass_context
def logs(ctx: click.Context, job_id: int, path: str | None, as_json: bool) -> None:
    """List a job's log files, or print the one at PATH (as the listing names it)."""
    client = api(ctx)
    if path is not None:
        text = client.get_text(f"/jobs/{job_id}/logs/file", {"path": path})
        if as_json:
            show({"id": job_id, "path": path, "text": text}, True, str)
        else:
            click.echo(text, nl=not text.endswith("\n"))
        return
    listing = client.get(f"/jobs/{job_id}/logs")

    def render(d: dict[str, Any]) -> Any:
        rows = [[r["set"], r["recipe"], r["system"], f] for r in d["logs"] for f in r["files"]]
        return table(["set", "recipe", "system", "file"], rows)

    show(listing, as_json, render)


@job.command("priority")
@click.argument("job_id", metavar="ID", type=int)
@click.argument("level", metavar="LEVEL")
@json_option
@click.pass_context
def priority(ctx: click.Context, job_id: int, level: str, as_json: bool) -> None:
    """Change the priority of a job's waiting sets (raising it needs an admin)."""
    label = priority_label(level, "LEVEL")
    done = api(ctx).post(f"/jobs/{job_id}/priority", {"priority": label})
    show(done, as_json, lambda d: f"job {d['id']}: {d['sets']} set(s) now {d['priority']}")


def _duration(seconds: float) -> str:
    """A short age: 45s, 12m, 3h05m."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


@click.command()
@json_option
@click.pass_context
def queue(ctx: click.Context, as_json: bool) -> None:
    """The queued recipe sets in scheduling order, with what decides each place."""
    rows = api(ctx).get("/queue")

    def render(d: dict[str, Any]) -> Any:
        headers = [
            "#",
            "set",
            "job",
            "effective",
            "nominal",
            "spv",
            "weight",
            "age (ticks)",
            "hold",
            "waits for",
        ]
        return table(
            headers,
            [
                [
                    r["position"],
                    r["set_id"],
                    r["job_id"],
                    r["effective"] or "no pool",
                    r["nominal"],
                    f"{r['spv']:g}",
                    f"{r['weight']:.2f}",
                    f"{_duration(r['age_s'])} ({r['age_ticks']})",
                    r["hold"],
                    r["waits_for"] or "its turn",
                ]
                for r in d["queue"]
            ],
            title=None if d["queue"] else "the queue is empty",
        )

    show(rows, as_json, render)
