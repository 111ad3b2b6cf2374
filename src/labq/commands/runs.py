"""``labq run`` (list, show, cancel) and ``labq suite`` (a teuthology suite as one run)."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from rich.console import Group

from labq.commands import api, fields, json_option, show, show_change, table, when
from labq.domain.runs import STATUSES
from labq.errors import InputError
from labq.formats.suite import Subset, SuiteJob, expand, split_words, suite_name
from labq.terminal import progress, shows_progress, working


@click.group("run")
def run_group() -> None:
    """Runs: jobs submitted together (a suite, or `job submit --run`)."""


@run_group.command("list")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True)
@json_option
@click.pass_context
def list_runs(ctx: click.Context, limit: int, offset: int, as_json: bool) -> None:
    """List runs, newest first, with how many jobs are queued, running, passed, failed, dead."""
    page = api(ctx).get("/runs", {"limit": limit, "offset": offset})

    def render(data: dict[str, Any]) -> Any:
        runs = data["runs"]
        if not runs:
            return "no runs"
        rows = [
            [r["name"], r["owner"], when(r["created_at"]), *(r["counts"][s] for s in STATUSES)]
            for r in runs
        ]
        title = f"runs {offset + 1}-{offset + len(runs)} of {data['total']}"
        return table(["name", "owner", "created", *STATUSES], rows, title=title)

    show(page, as_json, render)


@run_group.command("show")
@click.argument("name")
@json_option
@click.pass_context
def show_run(ctx: click.Context, name: str, as_json: bool) -> None:
    """Show a run: its counts and every job in it."""
    found = api(ctx).get(f"/runs/{name}")

    def render(d: dict[str, Any]) -> Any:
        head = fields({**d, "created": when(d["created_at"])}, ["name", "owner", "created"])
        counts = "  ".join(f"{s}: {d['counts'][s]}" for s in STATUSES)
        rows = [[j["id"], j["state"], j["result"], j["whiteboard"]] for j in d["jobs"]]
        return Group(head, counts, "", table(["job", "state", "result", "description"], rows))

    show(found, as_json, render)


@run_group.command("cancel")
@click.argument("name")
@click.option("--reason", default=None, help="Why (kept with each job).")
@json_option
@click.pass_context
def cancel_run(ctx: click.Context, name: str, reason: str | None, as_json: bool) -> None:
    """Cancel every unfinished job of a run."""
    with working(f"cancelling run {name}", shows_progress(as_json)):
        done = api(ctx).post(f"/runs/{name}/cancel", {"reason": reason} if reason else None)
    show_change(done, as_json, lambda d: f"run {d['name']}: {len(d['cancelled'])} job(s) cancelled")


def submit_run(
    ctx: click.Context, name: str, documents: list[dict[str, str]], meta: dict[str, Any]
) -> dict[str, Any]:
    """Send the documents as one run; the server stores all of them or none."""
    created: dict[str, Any] = api(ctx).post(
        "/runs", {"name": name, "metadata": meta, "jobs": documents}
    )
    return created


@click.command("suite")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--filter",
    "filter_in",
    multiple=True,
    help="Only jobs whose description has one of these words (comma-separated; repeatable).",
)
@click.option(
    "--filter-out",
    multiple=True,
    help="Leave out jobs whose description has one of these words (comma-separated; repeatable).",
)
@click.option(
    "--subset",
    default=None,
    metavar="I/N",
    help="The I-th of N slices that each still cover every facet, as teuthology-suite's --subset.",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=None,
    help="Seed of the '$' random picks (default: a new one, printed, so the run can be repeated).",
)
@click.option(
    "--priority",
    type=click.IntRange(min=1),
    default=None,
    help="Teuthology priority of every job (lower is sooner), instead of the fragments'.",
)
@click.option("--run", "run_name", default=None, help="The run's name (default: SUITE-TIME).")
@click.option("--dry-run", is_flag=True, help="Print the jobs; submit nothing.")
@json_option
@click.pass_context
def suite(
    ctx: click.Context,
    directory: Path,
    filter_in: tuple[str, ...],
    filter_out: tuple[str, ...],
    subset: str | None,
    seed: int | None,
    priority: int | None,
    run_name: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Expand a teuthology suite directory into jobs and submit them as one run."""
    chosen = Subset.parse(subset) if subset else None
    if seed is None:
        seed = random.SystemRandom().randrange(10_000)  # teuthology's range of seeds
    shown = shows_progress(as_json)
    with progress(shown) as bar:
        expanding = bar.add_task(f"expanding {directory}", total=None)
        jobs = expand(
            directory,
            seed=seed,
            subset=chosen,
            filter_in=split_words(filter_in),
            filter_out=split_words(filter_out),
        )
        bar.remove_task(expanding)
        if priority is not None:
            for job in jobs:
                job.config["priority"] = priority
        for job in bar.track(jobs, description="checking jobs"):
            job.spec()  # every job is checked here first: the first bad one is named
    name = run_name or _default_name(suite_name(directory))
    meta = {
        "suite": suite_name(directory),
        "seed": seed,
        "subset": subset,
        "filter": list(filter_in),
        "filter_out": list(filter_out),
    }
    if dry_run:
        _print_dry_run(jobs, meta, as_json)
        return
    if not jobs:
        raise InputError(
            "no job is left after the filters: nothing submitted", source=str(directory)
        )
    documents = [
        {"name": j.description, "document": j.document(), "format": "teuthology"} for j in jobs
    ]
    with working(f"submitting run {name} ({len(documents)} jobs)", shown):
        created = submit_run(ctx, name, documents, meta)
    show(
        created,
        as_json,
        lambda d: f"submitted run {d['name']}: {len(d['jobs'])} job(s), seed {seed}",
    )


def _default_name(suite: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d_%H:%M:%S")
    return f"{suite.replace('/', '-')}-{stamp}"


def _print_dry_run(jobs: list[SuiteJob], meta: dict[str, Any], as_json: bool) -> None:
    if as_json:
        data = {
            **meta,
            "jobs": [
                {
                    "description": j.description,
                    "fragments": [str(p) for p in j.paths],
                    "config": j.config,
                }
                for j in jobs
            ],
        }
        show(data, True, str)
        return
    for job in jobs:
        click.echo(job.description)
    click.echo(f"{len(jobs)} job(s), seed {meta['seed']} (dry run: nothing submitted)")
