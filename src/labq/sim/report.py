"""Turning runs into what ``labq sim`` prints: JSON objects and tables."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table

from labq.sim.metrics import Metrics, measure, recipe_rows, set_rows, stuck
from labq.sim.runner import Run


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
    return {
        "policies": [
            {
                "policy": run.policy,
                **_metrics_dict(measure(run.world)),
                "stuck": len(stuck(run.world)),
            }
            for run in runs
        ]
    }


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
    for name, value in _rows(metrics):
        table.add_row(name, value)
    console.print(table)
    problems = stuck(run.world)
    if problems:
        console.print(f"[bold red]{len(problems)} recipe set(s) stuck:[/]")
        for item in problems:
            console.print(f"  {item['job']} set {item['recipe_set']}: {item['reason']}")
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
    """One table, a column per policy."""
    table = Table(title="labq sim — policies compared")
    table.add_column("metric")
    measured = [measure(run.world) for run in runs]
    for run in runs:
        table.add_column(run.policy, justify="right")
    names = [name for name, _ in _rows(measured[0])] if measured else []
    columns = [dict(_rows(m)) for m in measured]
    for name in names:
        table.add_row(name, *(col[name] for col in columns))
    table.add_row("stuck sets", *(str(len(stuck(run.world))) for run in runs))
    console.print(table)


def _rows(metrics: Metrics) -> list[tuple[str, str]]:
    return [
        ("recipe sets (started)", f"{metrics.sets} ({metrics.started})"),
        ("mean wait", _duration(metrics.mean_wait)),
        ("p95 wait", _duration(metrics.p95_wait)),
        ("max wait", _duration(metrics.max_wait)),
        ("mean bounded slowdown", f"{metrics.mean_bounded_slowdown:.2f}"),
        ("utilisation", f"{metrics.utilization:.1%}"),
        ("makespan", _duration(metrics.makespan)),
        ("Jain fairness (groups)", f"{metrics.jain_fairness:.3f}"),
        ("lock waiting, total", _duration(metrics.locks.total)),
        ("  for declared locks", _duration(metrics.locks.declared)),
        ("  for lock-plan steps", _duration(metrics.locks.run)),
        ("sets that waited for locks", str(metrics.locks.sets)),
        ("max lock wait of a set", _duration(metrics.locks.max)),
        ("lock waits refused (deadlock)", str(metrics.locks.refused)),
    ]


LONGEST = 5  # sets listed under "Longest lock waits"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
