"""``labq job cancel`` and ``labq job priority``: one job by id, or many by filter.

With filters (Slurm's ``scancel -u alice``) the server is first asked what
would change (a dry run); on a terminal the person confirms the count; without
a terminal ``--yes`` must say so in advance. Jobs the caller may not change are
listed with why, and the command then exits 1.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from labq.commands import api, json_option, show, show_change
from labq.commands.durations import parse_duration
from labq.commands.jobs import job
from labq.commands.pools import priority_label
from labq.domain.states import RecipeState
from labq.errors import InputError
from labq.terminal import shows_progress, working

STATES = [s.value for s in RecipeState]


def filter_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The filters a bulk change takes (as ``job list`` does, plus ``--older-than``)."""
    for option in reversed(
        [
            click.option("--owner", default=None, help="Jobs of this user."),
            click.option("--group", default=None, help="Jobs of this group."),
            click.option("--state", type=click.Choice(STATES), default=None, help="Job state."),
            click.option("--whiteboard", default=None, metavar="GLOB", help="* and ? match."),
            click.option("--run", "run_name", default=None, metavar="NAME", help="Jobs of a run."),
            click.option(
                "--older-than",
                default=None,
                metavar="DURATION",
                help="Submitted longer ago than this: 90s, 30m, 2h, 1d.",
            ),
            click.option("--yes", is_flag=True, help="Do not ask for confirmation."),
        ]
    ):
        command = option(command)
    return command


def filter_body(ids: tuple[int, ...], **given: str | None) -> dict[str, Any]:
    """The API's filter body for the ids and the filters given."""
    body: dict[str, Any] = {"ids": list(ids)} if ids else {}
    older = given.pop("older_than", None)
    if older is not None:
        body["older_than_s"] = parse_duration(older, place="--older-than")
    body.update({("run" if k == "run_name" else k): v for k, v in given.items() if v is not None})
    return body


@job.command("cancel")
@click.argument("job_ids", metavar="[ID]...", nargs=-1, type=click.IntRange(min=1))
@filter_options
@click.option("--reason", default=None, help="Why (kept with each job).")
@json_option
@click.pass_context
def cancel(
    ctx: click.Context,
    /,
    job_ids: tuple[int, ...],
    reason: str | None,
    yes: bool,
    as_json: bool,
    **filters: str | None,
) -> None:
    """Cancel every unfinished recipe of the jobs given by id or chosen by filters."""
    extra = {"reason": reason} if reason else {}
    if len(job_ids) == 1 and not any(filters.values()):
        done = api(ctx).post(f"/jobs/{job_ids[0]}/cancel", extra or None)
        show_change(done, as_json, lambda d: f"job {d['id']}: {d['cancelled']} recipe(s) cancelled")
        return
    body = {**filter_body(job_ids, **filters), **extra}
    _change(ctx, "/jobs/cancel", body, "cancel {n} job(s)?", "cancelled", yes, as_json)


@job.command("priority")
@click.argument("words", metavar="[ID]... LEVEL", nargs=-1, required=True)
@filter_options
@json_option
@click.pass_context
def priority(
    ctx: click.Context, /, words: tuple[str, ...], yes: bool, as_json: bool, **filters: str | None
) -> None:
    """Change the priority of waiting sets of the jobs given or chosen (raising needs an admin)."""
    *id_words, level = words
    label = priority_label(level, "LEVEL")
    job_ids = tuple(_job_id(w) for w in id_words)
    if len(job_ids) == 1 and not any(filters.values()):
        done = api(ctx).post(f"/jobs/{job_ids[0]}/priority", {"priority": label})
        show_change(done, as_json, lambda d: f"job {d['id']}: {len(d['sets'])} set(s) now {label}")
        return
    body = {**filter_body(job_ids, **filters), "priority": label}
    question = f"set {{n}} job(s) to {label}?"
    _change(ctx, "/jobs/priority", body, question, f"set to {label}", yes, as_json)


def _job_id(word: str) -> int:
    if not word.isdigit() or int(word) < 1:
        raise InputError(f"{word!r} is not a job id", place="ID")
    return int(word)


def _change(
    ctx: click.Context,
    path: str,
    body: dict[str, Any],
    question: str,
    done_word: str,
    yes: bool,
    as_json: bool,
) -> None:
    """Ask what would change, confirm the count, change, and say how many changed."""
    client = api(ctx)
    shown = shows_progress(as_json)
    filtered = set(body) - {"ids", "reason", "priority"}
    if not yes and filtered:
        with working("finding the jobs", shown):
            preview = client.post(path, {**body, "dry_run": True})
        count = len(preview["changed"])
        if count == 0:
            show(preview, as_json, _told(done_word))
            _exit_if_refused(preview)
            return
        if not sys.stdin.isatty():
            raise InputError(
                f"this would change {count} job(s): add --yes to do it without a terminal",
                place="--yes",
            )
        click.confirm(question.format(n=count), abort=True, err=True)
    with working(f"{path.rsplit('/', 1)[-1]}: changing the jobs", shown):
        answer = client.post(path, body)
    show(answer, as_json, _told(done_word))
    _exit_if_refused(answer)
    if not filtered and not answer["changed"]:
        # the jobs were named, not swept for: what was asked of them did not happen
        raise click.exceptions.Exit(1)


def _told(done_word: str) -> Callable[[dict[str, Any]], str]:
    def text(d: dict[str, Any]) -> str:
        count = len(d["changed"])
        verb = done_word if not d["dry_run"] else f"would be {done_word}"
        lines = [f"{count} job(s) {verb}: {', '.join(str(c['id']) for c in d['changed'])}"]
        if not d["changed"]:
            lines = [f"no job {verb} ({d['matched']} matched)"]
        if d["unchanged"]:
            lines.append(f"{d['unchanged']} job(s) had nothing to change")
        if d["refused"]:
            lines.append(f"{len(d['refused'])} job(s) refused:")
            lines += [f"  {r['reason']}" for r in d["refused"]]
        return "\n".join(lines)

    return text


def _exit_if_refused(answer: dict[str, Any]) -> None:
    if answer["refused"]:
        raise click.exceptions.Exit(1)
