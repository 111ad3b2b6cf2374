"""``labq job`` and ``labq queue``."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import click
from rich.console import Group
from rich.text import Text

from labq.client import ServerError
from labq.commands import api, cell, fields, json_option, show, table, when
from labq.commands.logtail import print_log
from labq.commands.waiting import follow
from labq.domain.states import RecipeState
from labq.errors import LabqError
from labq.formats.names import FORMATS, Format
from labq.terminal import progress, shows_progress, working
from labq.usecases.forecasts import forecast_line

WAITING_STATES: Final = ["new", "queued", "assigned", "scheduled"]
CONTENT_TYPES: Final = {".xml": "application/xml", ".json": "application/json"}
_SERVER_SOURCE = re.compile(r"^job(:\d+)?: ")


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
    # here, not at the top: the parsers are most of what a `labq job` command would import
    from labq.commands.runs import submit_run
    from labq.formats.loader import load_job
    from labq.formats.source import read_document

    shown = shows_progress(as_json) and len(files) > 1
    with progress(shown) as bar:
        for file in bar.track(files, description="checking files"):
            load_job(file, fmt=fmt)  # the message of `labq validate`, before anything is sent
    if run_name is not None:
        if wait:
            raise click.UsageError("--wait follows one job; follow a run with `labq run show`")
        documents = [
            {"name": file, "document": read_document(file), "format": fmt} for file in files
        ]
        with working(f"submitting run {run_name} ({len(files)} jobs)", shown):
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
        named = _SERVER_SOURCE.sub(lambda m: f"{file}{m[1] or ''}: ", exc.message)
        raise LabqError(named) from None
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
@click.option("--whiteboard", default=None, metavar="GLOB", help="Whiteboard (* and ? match).")
@click.option("--run", "run_name", default=None, metavar="NAME", help="Only this run's jobs.")
@click.option("--lab", default=None, help="Only jobs that started in this lab.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True)
@json_option
@click.pass_context
def list_jobs(
    ctx: click.Context,
    /,
    limit: int,
    offset: int,
    as_json: bool,
    **filters: str | None,
) -> None:
    """List jobs, newest first: who, how long they waited and ran, what waiting ones wait for."""
    params = {"run" if k == "run_name" else k: v for k, v in filters.items()}
    page = api(ctx).get("/jobs", {**params, "limit": limit, "offset": offset})

    def render(data: dict[str, Any]) -> Any:
        jobs = data["jobs"]
        title = f"jobs {offset + 1}-{offset + len(jobs)} of {data['total']}" if jobs else "no jobs"
        headers = ["id", "owner", "group", "state", "result", "submitted", "waited", "ran"]
        return table(
            [*headers, "run", "whiteboard", "reason"],
            [
                [
                    j["id"],
                    j["owner"],
                    j["group"],
                    j["state"],
                    j["result"],
                    when(j["submitted_at"]),
                    _age(j["waited_s"]),
                    _age(j["elapsed_s"]),
                    j["run"],
                    j["whiteboard"],
                    j["reason"],
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
        submitted = when(d.get("submitted_at"))
        head = fields(
            {**d, "submitted_at": None if submitted is None else f"{submitted} UTC"},
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
        notes = [*forecast_notes(d.get("forecasts") or []), *set_notes(d["sets"])]
        return Group(head, "", table([*headers, "tasks"], rows), *notes)

    show(found, as_json, render)


def forecast_notes(forecasts: list[dict[str, Any]]) -> list[Text]:
    """One line per forecast: ``set 5: starts ~14:05 UTC, ends ~15:30 UTC; 23 earlier …``."""
    now = datetime.now(UTC)
    return [Text(f"set {f['set_id']}: {forecast_line(f, now)}") for f in forecasts]


def set_notes(sets: list[dict[str, Any]]) -> list[Text]:
    """One line per set that was stopped or carries an error: why, in plain words."""
    notes = []
    for rset in sets:
        if rset["stop_reason"]:
            notes.append(Text(f"set {rset['id']} stopped: {rset['stop_reason']}"))
        if rset["error"]:
            notes.append(Text(f"set {rset['id']}: {rset['error']}"))
    return notes


@job.command("results")
@click.argument("job_id", metavar="ID", type=int)
@click.option(
    "--junit",
    "junit_file",
    default=None,
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="Write them as JUnit XML to this file ('-': stdout), logs attached.",
)
@json_option
@click.pass_context
def results(ctx: click.Context, job_id: int, junit_file: Path | None, as_json: bool) -> None:
    """The result of every recipe and task."""
    if junit_file is not None:
        from labq.commands.junit import write_junit

        write_junit(api(ctx), job_id, junit_file, as_json)
        return
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
@click.argument("path", metavar="[PATH|FILE|TASK]", required=False)
@click.option(
    "--follow", "-f", is_flag=True, help="Print what the task writes until it ends (tail -f)."
)
@json_option
@click.pass_context
def logs(ctx: click.Context, job_id: int, path: str | None, follow: bool, as_json: bool) -> None:
    """List a job's log files, or print one: by its PATH (as the listing names it), its bare
    FILE name, or a TASK's id or name; --follow without one follows the running task."""
    client = api(ctx)
    if follow or (path is not None and "/" not in path):
        print_log(client, job_id, path, follow, as_json)
        return
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


def _duration(seconds: float) -> str:
    """A short age: 45s, 12m, 3h05m."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def _age(seconds: float | None) -> str | None:
    return None if seconds is None else _duration(seconds)


def queue_filters(command: Callable[..., Any]) -> Callable[..., Any]:
    """``labq queue``'s filters (squeue's -u, -A, -p, -t; and whiteboard, run)."""
    for option in reversed(
        [
            click.option("--owner", default=None, help="Only this user's sets."),
            click.option("--group", default=None, help="Only this group's sets."),
            click.option("--lab", default=None, help="Only sets held in, or able to run in, LAB."),
            click.option(
                "--state", type=click.Choice(WAITING_STATES), default=None, help="Set state."
            ),
            click.option("--whiteboard", default=None, metavar="GLOB", help="* and ? match."),
            click.option("--run", "run_name", default=None, metavar="NAME", help="A run's sets."),
        ]
    ):
        command = option(command)
    return command


@click.command()
@queue_filters
@json_option
@click.pass_context
def queue(ctx: click.Context, /, as_json: bool, **filters: str | None) -> None:
    """The queued recipe sets in scheduling order: whose, how long waited, what they wait for,
    and when each should start and end."""
    params = {"run" if k == "run_name" else k: v for k, v in filters.items()}
    filtered = any(v is not None for v in params.values())  # every filter is there, unset
    rows = api(ctx).get("/queue", params)

    def render(d: dict[str, Any]) -> Any:
        headers = ["#", "set", "job", "owner", "priority", "spv", "weight", "waited (ticks)"]
        grid = table(
            [*headers, "hold", "whiteboard", "reason"],
            [
                [
                    r["position"],
                    r["set_id"],
                    r["job_id"],
                    r["owner"],
                    _priority(r),
                    f"{r['spv']:g}",
                    f"{r['weight']:.2f}",
                    f"{_duration(r['age_s'])} ({r['age_ticks']})",
                    r["hold"],
                    r["whiteboard"],
                    r["reason"] or r["waits_for"],
                ]
                for r in d["queue"]
            ],
            title=None if d["queue"] else "no set waits" + (" (filtered)" if filtered else ""),
        )
        forecasts = [r["forecast"] for r in d["queue"] if r.get("forecast")]
        return Group(grid, "", *forecast_notes(forecasts)) if forecasts else grid

    show(rows, as_json, render)


def _priority(row: dict[str, Any]) -> str:
    """``normal``, or ``high (capped medium)`` when pools cap it, ``high (no pool)``."""
    if row["effective"] is None:
        return f"{row['nominal']} (no pool)"
    if row["effective"] != row["nominal"]:
        return f"{row['nominal']} (capped {row['effective']})"
    return str(row["nominal"])
