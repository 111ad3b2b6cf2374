"""Charts of simulation runs (``labq sim --plot DIR``), drawn off-screen with Agg.

- ``wait_distribution.png``: for each policy, the share of recipe sets that
  started within a given wait (an ECDF over *every* set, so a policy that left
  sets stuck never reaches 100 %);
- ``utilisation.png``: systems installing or running over time, per policy;
- ``gantt-<policy>.png``: one row per system, a bar per recipe it held (pale
  while held before its set started, solid while it ran).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from labq.sim.metrics import WORKING
from labq.sim.runner import Run
from labq.sim.world import World

GANTT_ROWS: Final = 200  # more rows than this are unreadable at any size
BINS: Final = 600  # points per utilisation curve: finer is noise at trace scale
_UNITS: Final = ((7200.0, 3600.0, "h"), (120.0, 60.0, "min"), (0.0, 1.0, "s"))
_STYLES: Final = ("-", "--", "-.", ":")  # policies that tie stay visible


def write_plots(
    runs: list[Run], directory: str, done: Callable[[], None] = lambda: None
) -> list[Path]:
    """Write the charts of these runs into ``directory`` (made if missing); their paths.

    ``done`` is called after each chart (a progress bar counts them).
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = [_wait_distribution(runs, out / "wait_distribution.png")]
    done()
    paths.append(_utilisation(runs, out / "utilisation.png"))
    done()
    used: set[str] = set()
    for run in runs:
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", run.policy)
        stem, n = name, 1
        while name in used:  # the same policy twice in one comparison
            n += 1
            name = f"{stem}-{n}"
        used.add(name)
        paths.append(_gantt(run, out / f"gantt-{name}.png"))
        done()
    return paths


def _unit(seconds: float) -> tuple[float, str]:
    """The unit that makes ``seconds`` read well: (seconds per unit, its name)."""
    return next((size, name) for above, size, name in _UNITS if seconds >= above)


def _save(figure: Figure, path: Path) -> Path:
    figure.savefig(path, dpi=110)
    return path


# --- wait distribution ----------------------------------------------------------------


def _wait_distribution(runs: Sequence[Run], path: Path) -> Path:
    figure = Figure(figsize=(8, 5), layout="constrained")
    ax = figure.add_subplot()
    waits = [_waits(run.world) for run in runs]
    longest = max((max(w, default=0.0) for w in waits), default=0.0)
    size, unit = _unit(longest)
    for i, (run, values) in enumerate(zip(runs, waits, strict=True)):
        total = len(run.world.sets)
        ordered = np.sort(np.asarray(values, dtype=float)) / size
        share = np.arange(1, len(ordered) + 1) / max(total, 1)
        x = np.concatenate(([0.0], ordered))
        y = np.concatenate(([0.0], share))
        ax.step(
            x,
            y,
            where="post",
            linestyle=_STYLES[i % len(_STYLES)],
            label=f"{run.policy} ({len(values)}/{total} started)",
        )
    pooled = np.concatenate([np.asarray(w, dtype=float) for w in waits]) if waits else None
    if pooled is not None and pooled.size and np.median(pooled) < longest / 100:
        # most sets wait little and a few wait long: a linear axis hides the many
        ax.set_xscale("symlog", linthresh=max(longest / size / 1000, 1e-3))
    ax.set_xlabel(f"wait before the set started ({unit})")
    ax.set_ylabel("share of recipe sets started")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    ax.set_title("Wait time distribution (ECDF; stuck sets never reach the top)")
    return _save(figure, path)


def _waits(world: World) -> list[float]:
    return [r.started_at - r.submitted for r in world.sets.values() if r.started_at is not None]


# --- utilisation --------------------------------------------------------------------


def _utilisation(runs: Sequence[Run], path: Path) -> Path:
    figure = Figure(figsize=(10, 4.5), layout="constrained")
    ax = figure.add_subplot()
    curves = [(run.policy, *_working_curve(run.world)) for run in runs]
    span = max((float(t[-1] - t[0]) for _, t, _ in curves if len(t)), default=0.0)
    size, unit = _unit(span)
    systems = max((len(run.world.ledger.systems) for run in runs), default=0)
    for i, (policy, times, values) in enumerate(curves):
        if len(times):
            style = _STYLES[i % len(_STYLES)]
            ax.plot((times - times[0]) / size, values, style, label=policy, linewidth=1)
    ax.axhline(systems, color="grey", linestyle="--", linewidth=0.8, label=f"{systems} systems")
    ax.set_xlabel(f"time since the first event ({unit})")
    ax.set_ylabel("systems installing or running")
    ax.set_ylim(0, max(systems, 1) * 1.05)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    ax.set_title("Utilisation over time")
    return _save(figure, path)


def _working_curve(world: World) -> tuple[np.ndarray, np.ndarray]:
    """Systems working over time, averaged over at most ``BINS`` equal slices."""
    rows = world.ledger.history.rows
    if not rows:
        return np.zeros(0), np.zeros(0)
    first = min(r.start for r in rows)
    last = max(max(r.start, r.end or r.start) for r in rows)
    changes: dict[float, int] = {}
    for row in rows:
        if row.usage in WORKING:
            changes[row.start] = changes.get(row.start, 0) + 1
            end = row.end if row.end is not None else last
            changes[end] = changes.get(end, 0) - 1
    if last <= first or not changes:
        return np.array([first, last]), np.zeros(2)
    times = np.array(sorted(changes), dtype=float)
    level = np.cumsum([changes[t] for t in sorted(changes)], dtype=float)
    # the area under the step function up to each change, then the mean per bin
    area = np.concatenate(([0.0], np.cumsum(level[:-1] * np.diff(times))))
    edges = np.linspace(first, last, BINS + 1)
    below = np.interp(edges, times, area, left=0.0, right=area[-1])
    means = np.diff(below) / np.diff(edges)
    return (edges[:-1] + edges[1:]) / 2, means


# --- Gantt -------------------------------------------------------------------------------


def _gantt(run: Run, path: Path) -> Path:
    world = run.world
    names = sorted(world.ledger.systems, key=_natural)
    shown = names[:GANTT_ROWS]
    row_of = {fqdn: i for i, fqdn in enumerate(shown)}
    held: list[list[tuple[float, float]]] = [[] for _ in shown]
    ran: list[list[tuple[float, float]]] = [[] for _ in shown]
    colours: list[list[int]] = [[] for _ in shown]
    end_of_time = max((r.finished_at or 0.0 for r in world.recipes.values()), default=0.0)
    for recipe in world.recipes.values():
        row = row_of.get(recipe.ran_on or "")
        if row is None or recipe.scheduled_at is None:
            continue
        start = recipe.started_at
        stop = recipe.finished_at if recipe.finished_at is not None else end_of_time
        if start is None or start > recipe.scheduled_at:
            held[row].append((recipe.scheduled_at, (start or stop) - recipe.scheduled_at))
        if start is not None:
            ran[row].append((start, stop - start))
            colours[row].append(recipe.set_id)
    height = min(14.0, 2.0 + 0.06 * len(shown)) if len(shown) > 20 else 1.5 + 0.3 * len(shown)
    figure = Figure(figsize=(11, height), layout="constrained")
    ax = figure.add_subplot()
    size, unit = _unit(end_of_time)
    _draw_bars(ax, held, ran, colours, span=end_of_time, scale=size)
    _label_rows(ax, shown)
    ax.set_xlabel(f"time ({unit})")
    cap = f" (first {len(shown)} of {len(names)} systems)" if len(names) > len(shown) else ""
    ax.set_title(f"Systems over time — policy {run.policy}{cap}; pale: held before start")
    return _save(figure, path)


def _draw_bars(
    ax: Axes,
    held: list[list[tuple[float, float]]],
    ran: list[list[tuple[float, float]]],
    colours: list[list[int]],
    *,
    span: float,
    scale: float,
) -> None:
    """Bars in units of ``scale`` seconds, so the axis gets round ticks."""
    palette = [f"C{i}" for i in range(10)]  # neighbouring sets differ in colour
    for row, (pale_s, solid_s, sets) in enumerate(zip(held, ran, colours, strict=True)):
        pale = [(start / scale, width / scale) for start, width in pale_s]
        solid = [(start / scale, width / scale) for start, width in solid_s]
        if pale:
            ax.broken_barh(pale, (row - 0.4, 0.8), facecolors="#d0d0d0", edgecolor="none")
        if solid:
            ax.broken_barh(
                solid,
                (row - 0.4, 0.8),
                facecolors=[palette[s % len(palette)] for s in sets],
                edgecolor="white" if len(solid) < 200 else "none",
                linewidth=0.3,
            )
    ax.set_xlim(0, max(span, 1.0) / scale)
    ax.set_ylim(len(held) - 0.5, -0.5)  # first system on top


def _label_rows(ax: Axes, shown: list[str]) -> None:
    if len(shown) <= 40:
        ax.set_yticks(range(len(shown)), shown, fontsize="small")
    else:
        ax.set_yticks([])
        ax.set_ylabel(f"{len(shown)} systems")


def _natural(name: str) -> list[tuple[str, int]]:
    """``node-2`` before ``node-10``: (text, number) pairs compare part by part."""
    parts = re.split(r"(\d+)", name)
    return [
        (parts[i], int(parts[i + 1]) if i + 1 < len(parts) else -1) for i in range(0, len(parts), 2)
    ]
