"""``labq job watch ID…``: follow existing jobs to their end, as ``submit --wait`` does.

The same display (a live line on a terminal, changed lines in a log) and the same
exit code: 0 when every job passed, 1 when any did not. A job has ended only when
no retry follows (the API's job state is not final while one is owed).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

import click
from rich.console import Console

from labq.client import Client
from labq.commands import api, json_option
from labq.commands.jobs import job
from labq.commands.waiting import FINAL, POLL_SECONDS, follow, passed, progress

Fetch = Callable[[], list[dict[str, Any]]]


@job.command("watch")
@click.argument("job_ids", metavar="ID...", nargs=-1, required=True, type=click.IntRange(min=1))
@json_option
@click.pass_context
def watch(ctx: click.Context, job_ids: tuple[int, ...], as_json: bool) -> None:
    """Follow jobs until all have ended; exit 0 if all passed, 1 if any did not."""
    client = api(ctx)
    wanted = list(dict.fromkeys(job_ids))  # once each, in the order given
    if len(wanted) == 1:
        ok = follow(client, wanted[0], as_json=as_json)
    else:
        ok = follow_all(client, wanted, as_json=as_json)
    if not ok:
        raise click.exceptions.Exit(1)


def follow_all(
    client: Client,
    job_ids: list[int],
    *,
    as_json: bool = False,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Poll every job's results until all have ended; True if every one passed.

    With ``as_json`` the progress lines go to stderr and stdout gets a JSON list
    of the final results, one per job.
    """

    def fetch() -> list[dict[str, Any]]:
        return [client.get(f"/jobs/{i}/results") for i in job_ids]

    if as_json:
        results = _plain(fetch, sleep, err=True)
        click.echo(json.dumps(results, indent=2))
        return all(passed(r) for r in results)
    results = _live(fetch, sleep) if sys.stdout.isatty() else _plain(fetch, sleep)
    for one in results:
        click.echo(f"job {one['id']} {one['state']}: {one['result'] or 'no result'}")
        for rset in one["sets"]:
            if rset.get("current", True) and rset["error"]:
                click.echo(f"  set {rset['id']}: {rset['error']}")
    return all(passed(r) for r in results)


def _over(results: list[dict[str, Any]]) -> bool:
    return all(r["state"] in FINAL for r in results)


def _live(fetch: Fetch, sleep: Callable[[float], None]) -> list[dict[str, Any]]:
    results = fetch()
    with Console().status(_lines(results)) as status:
        while not _over(results):
            sleep(POLL_SECONDS)
            results = fetch()
            status.update(_lines(results))
    return results


def _plain(
    fetch: Fetch, sleep: Callable[[float], None], *, err: bool = False
) -> list[dict[str, Any]]:
    results = fetch()
    shown = {r["id"]: progress(r) for r in results}
    for line in shown.values():
        click.echo(line, err=err)
    while not _over(results):
        sleep(POLL_SECONDS)
        results = fetch()
        for one in results:
            line = progress(one)
            if shown[one["id"]] != line:
                click.echo(line, err=err)
                shown[one["id"]] = line
    return results


def _lines(results: list[dict[str, Any]]) -> str:
    return "\n".join(progress(r) for r in results)
