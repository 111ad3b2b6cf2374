"""``labq job submit --wait``: follow a job until it ends, on a terminal or in a log."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any, Final

import click
from rich.console import Console

from labq.client import Client

FINAL: Final = frozenset({"completed", "cancelled", "aborted"})
POLL_SECONDS: Final = 0.5


def progress(results: dict[str, Any]) -> str:
    """One line: the job's state and how many of its current tasks are done."""
    current = [s for s in results["sets"] if s.get("current", True)]
    tasks = [t for s in current for r in s["recipes"] for t in r["tasks"]]
    done = sum(1 for t in tasks if t["result"] is not None)
    systems = sorted({r["system"] for s in current for r in s["recipes"] if r["system"]})
    where = f" on {', '.join(systems)}" if systems else ""
    return f"job {results['id']}: {results['state']}, {done}/{len(tasks)} tasks done{where}"


def passed(results: dict[str, Any]) -> bool:
    """Completed without a failing result (``warn`` counts as passed)."""
    return results["state"] == "completed" and results["result"] in ("pass", "warn")


def follow(
    client: Client,
    job_id: int,
    *,
    as_json: bool = False,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Poll the job's results until it ends; show progress; True if it passed.

    With ``as_json`` the progress lines go to stderr and stdout gets the final
    results as one JSON document.
    """
    fetch: Callable[[], dict[str, Any]] = lambda: client.get(f"/jobs/{job_id}/results")  # noqa: E731
    if as_json:
        results = _follow_plain(fetch, sleep, err=True)
        click.echo(json.dumps(results, indent=2))
        return passed(results)
    results = _follow_live(fetch, sleep) if sys.stdout.isatty() else _follow_plain(fetch, sleep)
    verdict = results["result"] or "no result"
    click.echo(f"job {job_id} {results['state']}: {verdict}")
    for rset in results["sets"]:
        if rset.get("current", True) and rset["error"]:
            click.echo(f"  set {rset['id']}: {rset['error']}")
    return passed(results)


def _follow_live(fetch: Callable[[], dict[str, Any]], sleep: Callable[[float], None]) -> Any:
    console = Console()
    results = fetch()
    with console.status(progress(results)) as status:
        while results["state"] not in FINAL:
            sleep(POLL_SECONDS)
            results = fetch()
            status.update(progress(results))
    return results


def _follow_plain(
    fetch: Callable[[], dict[str, Any]], sleep: Callable[[float], None], *, err: bool = False
) -> Any:
    results = fetch()
    shown = progress(results)
    click.echo(shown, err=err)
    while results["state"] not in FINAL:
        sleep(POLL_SECONDS)
        results = fetch()
        line = progress(results)
        if line != shown:
            click.echo(line, err=err)
            shown = line
    return results
