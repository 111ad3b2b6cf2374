"""Turning runs into what ``labq sim`` prints: JSON objects and tables."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table

from labq.sim.metrics import Metrics, ended, measure, recipe_rows, set_rows, stuck
from labq.sim.runner import Run
from labq.sim.whatif import SHOWN, by_group, by_pool, cuts_json, fidelity


def run_report(run: Run) -> dict[str, Any]:
    """The full report of one run (``labq sim --json``)."""
    return {
        "policy": run.policy,
        "recipes": recipe_rows(run.world),
        "recipe_sets": set_rows(run.world),
        "metrics": _metrics_dict(measure(run.world)),
        "stuck": stuck(run.world),
    }


def write_json(body: dict[str, Any], out: TextIO) -> None:
    """Write a report as JSON: one line per key, lists of rows one compact row per line.

    A trace's report has hundreds of thousands of rows; indenting each field
    made it several times larger and slower to write (and to read back).
    """
    out.write("{\n")
    for position, (key, value) in enumerate(body.items()):
        out.write(f"  {json.dumps(key)}: ")
        if isinstance(value, list) and value and isinstance(value[0], dict):
            out.write("[\n")
            for i, row in enumerate(value):
                out.write("    " + json.dumps(row, separators=(",", ":")))
                out.write(",\n" if i < len(value) - 1 else "\n")
            out.write("  ]")
        else:
            out.write(json.dumps(value, separators=(",", ":")))
        out.write(",\n" if position < len(body) - 1 else "\n")
    out.write("}\n")


def compare_report(runs: list[Run]) -> dict[str, Any]:
    """One row of metrics per policy (``labq sim --compare --json``)."""
    until = horizon(runs)
    return {
        "policies": [
            {"policy": run.policy, **_metrics_dict(measure(run.world, until))} for run in runs
        ],
        "stuck_wait_until": until,
    }


def horizon(runs: list[Run]) -> float:
    """Until when a comparison counts a stuck set as waiting: the latest end of its runs."""
    return max((ended(run.world) for run in runs), default=0.0)


def _metrics_dict(metrics: Metrics) -> dict[str, Any]:
    out = asdict(metrics)
    out["jain_fairness"] = {
        "index": metrics.jain_fairness,
        "groups": metrics.group_mean_slowdown,
    }
    del out["group_mean_slowdown"]
    out["lock_waiting"] = out.pop("locks")
    return out


def print_run(run: Run, console: Console) -> None:
    """A human summary of one run: the metrics, then anything stuck."""
    metrics = measure(run.world)
    table = Table(title=f"labq sim — policy {run.policy}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in metric_rows(metrics):
        table.add_row(name, value)
    console.print(table)
    problems = stuck(run.world)
    if problems:
        console.print(f"[bold red]{len(problems)} recipe set(s) stuck:[/]")
        for item in problems:
            console.print(f"  {item['job']} set {item['recipe_set']}: {item['reason']}")
        console.print(STUCK_NOTE)
    errors = [r for r in set_rows(run.world) if r["error"]]
    for row in errors:
        console.print(f"  {row['job']} set {row['index']} attempt {row['attempt']}: {row['error']}")
    _print_lock_waits(run, console)


def _print_lock_waits(run: Run, console: Console) -> None:
    waited = [r for r in run.world.sets.values() if r.lock_wait > 0]
    if not waited:
        return
    waited.sort(key=lambda r: (-r.lock_wait, r.id))
    console.print(f"Longest lock waits ({len(waited)} set attempt(s) waited):")
    for one in waited[:LONGEST]:
        console.print(
            f"  {one.job} set {one.index} attempt {one.attempt}: {_duration(one.lock_wait)}"
            f" (declared locks {_duration(one.lock_wait_declared)},"
            f" lock plan {_duration(one.lock_wait_run)})"
        )


def print_compare(runs: list[Run], console: Console) -> None:
    """One table, a column per policy; a note when some policy left sets stuck."""
    table = Table(title="labq sim — policies compared")
    table.add_column("metric")
    measured = [measure(run.world, horizon(runs)) for run in runs]
    for run in runs:
        table.add_column(run.policy, justify="right")
    names = [name for name, _ in metric_rows(measured[0])] if measured else []
    columns = [dict(metric_rows(m)) for m in measured]
    for name in names:
        table.add_row(name, *(col[name] for col in columns))
    console.print(table)
    if any(m.stuck for m in measured):
        console.print(STUCK_NOTE)


def whatif_report(runs: list[Run]) -> dict[str, Any]:
    """Per group and per pool side by side, and the current run's fidelity (``--json``)."""
    current = next((r for r in runs if r.policy == "current"), None)
    body = cuts_json(runs)
    body["never_started"] = {
        run.policy: [
            f"{r['job']} set {r['index']}: {r['error']}"
            for r in set_rows(run.world)
            if r["error"] and r["started"] is None
        ]
        for run in runs
    }
    if current is not None:
        body["fidelity"] = fidelity(current).as_json()
    return body


def print_whatif(runs: list[Run], console: Console) -> None:
    """The per-group and per-pool tables, then how faithful the replay of the history was."""
    for title, cut in (("group", by_group), ("pool", by_pool)):
        table = Table(title=f"per {title}: mean wait / mean bounded slowdown / retries")
        table.add_column(title)
        cuts = {run.policy: cut(run) for run in runs}
        for run in runs:
            table.add_column(run.policy, justify="right")
        for key in sorted({k for c in cuts.values() for k in c}):
            cells = []
            for run in runs:
                one = cuts[run.policy].get(key)
                cells.append(
                    "-"
                    if one is None
                    else f"{_duration(one.mean_wait)} / {one.mean_bounded_slowdown:.2f}"
                    f" / {one.retries}"
                )
            table.add_row(key, *cells)
        console.print(table)
    for run in runs:
        never = [r for r in set_rows(run.world) if r["error"] and r["started"] is None]
        if never:
            console.print(f"{run.policy}: {len(never)} set(s) could never start:")
            for row in never[:SHOWN]:
                console.print(f"  {row['job']} set {row['index']}: {row['error']}")
    current = next((r for r in runs if r.policy == "current"), None)
    if current is None:
        return
    found = fidelity(current)
    console.print(
        f"Fidelity of the replay under the current settings: {found.on_time} of {found.sets}"
        f" sets ({found.share:.1%}) started within {found.tolerance:g} s of their recorded"
        f" start; {found.same_systems} on the systems they really ran on."
    )
    for line in found.mismatches[:SHOWN]:
        console.print(f"  {line}")
    for note in current.scenario.notes:
        console.print(f"  note: {note}")


def metric_rows(metrics: Metrics) -> list[tuple[str, str]]:
    """The headline metrics as (name, text) rows, as the tables print them."""
    at_least = "≥ " if metrics.stuck else ""  # stuck sets waited longer than the run lasted
    return [
        ("recipe sets (started)", f"{metrics.sets} ({metrics.started})"),
        ("stuck sets", str(metrics.stuck)),
        ("mean wait", at_least + _duration(metrics.mean_wait)),
        ("p95 wait", at_least + _duration(metrics.p95_wait)),
        ("max wait", at_least + _duration(metrics.max_wait)),
        ("mean bounded slowdown", f"{at_least}{metrics.mean_bounded_slowdown:.2f}"),
        ("utilisation", f"{metrics.utilization:.1%}"),
        ("makespan", at_least + _duration(metrics.makespan)),
        ("Jain fairness (groups)", f"{metrics.jain_fairness:.3f}"),
        ("lock waiting, total", _duration(metrics.locks.total)),
        ("  for declared locks", _duration(metrics.locks.declared)),
        ("  for lock-plan steps", _duration(metrics.locks.run)),
        ("sets that waited for locks", str(metrics.locks.sets)),
        ("max lock wait of a set", _duration(metrics.locks.max)),
        ("lock waits refused (deadlock)", str(metrics.locks.refused)),
    ]


LONGEST = 5  # sets listed under "Longest lock waits"
STUCK_NOTE = (
    "≥: a stuck set counts as waiting until the simulation ended (with --compare, the"
    " longest run's end) and the makespan runs to that end: the true figures are higher."
)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
