"""Charts drawn by matplotlib on the server, embedded in the page as inline SVG.

No script and nothing fetched: a page with charts works without JavaScript, and
its text (titles, tick labels, tooltips) stays real text a reader can select
and a test can read. Every chart of a page is drawn over the same window, which
its root element carries as ``data-window-start`` / ``data-window-end`` (ISO
8601, UTC), with the moments of its time ticks as ``data-x-ticks``.

Pure functions of plain values (no database, no clock). Times are epoch
seconds, labelled in UTC. Colours come from the Okabe–Ito palette, which stays
distinguishable with the common colour-vision deficiencies; past its eight
colours, lines also change their dash pattern.
"""

from __future__ import annotations

import io
import itertools
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.path import Path

# matplotlib is imported when a chart is first drawn, not with the module: its 0.8 s of
# CPU was paid by every server start (and every test that started one) before any page.

WIDTH_IN: Final = 7.6  # 760 px at 100 dpi
GANTT_WIDTH_IN: Final = 10.0  # a timeline gets a row of the page to itself
DPI: Final = 100
PALETTE: Final = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#000000",  # black
    "#F0E442",  # yellow: weakest on white, so last
)
DASHES: Final = ("-", "--", ":", "-.")
USAGE_COLOURS: Final = {
    "idle": "#DDDDDD",
    "pending": "#F0E442",
    "scheduled": "#56B4E9",
    "waiting": "#E69F00",
    "installing": "#CC79A7",
    "running": "#009E73",
}
OTHER_COLOUR: Final = "#777777"
ROW_IN: Final = 0.24  # one system's row in a Gantt chart, in inches
MAX_TIPS: Final = 2000  # past this many spans, a Gantt row has one tooltip, not one per span
DAY: Final = 86400
# Units a duration axis is labelled in: the largest that keeps the top above 1.
DURATION_UNITS: Final = ((DAY, "days"), (3600.0, "hours"), (60.0, "minutes"), (1.0, "seconds"))
_NOT_XML: Final = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_ids = itertools.count(1)


@dataclass(frozen=True)
class Series:
    """One line: ``(epoch seconds, value)`` points."""

    name: str
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class GanttSpan:
    """A stretch of time one system spent in one usage state."""

    start: float
    end: float
    state: str
    tooltip: str


@dataclass(frozen=True)
class GanttRow:
    """One system's spans, left to right."""

    label: str
    spans: tuple[GanttSpan, ...]


# --- text ----------------------------------------------------------------------------


def text(value: object) -> str:
    """``value`` as XML text or attribute content: escaped, characters XML forbids dropped."""
    return escape(_NOT_XML.sub("", str(value)), quote=True)


def plain(label: str) -> str:
    """``label`` for matplotlib to draw as it is: no mathtext between ``$``, nothing XML forbids."""
    return _NOT_XML.sub("", label).replace("\x00", "").replace("$", r"\$")


def utc(seconds: float) -> str:
    """An epoch time as ``2026-01-31 14:05:09 UTC``."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def span_of(seconds: float) -> str:
    """A duration in its two largest units: ``2 h 10 min``, ``3 min 5 s``."""
    left = max(0, round(seconds))
    parts: list[str] = []
    for unit, size in (("d", DAY), ("h", 3600), ("min", 60), ("s", 1)):
        amount, left = divmod(left, size)
        if amount or (unit == "s" and not parts):
            parts.append(f"{amount}\u00a0{unit}")  # a number and its unit on one line
    return " ".join(parts[:2])


def duration_unit(values: Sequence[float]) -> tuple[float, str]:
    """The unit a duration axis reads best in: ``(seconds per unit, its name)``."""
    top = max((v for v in values if math.isfinite(v)), default=0.0)
    return next(
        ((size, name) for size, name in DURATION_UNITS if top >= 2 * size), (1.0, "seconds")
    )


# --- line chart ------------------------------------------------------------------------


def line_chart(
    series: Sequence[Series],
    *,
    title: str,
    y_label: str,
    window: tuple[float, float],
    y_max: float | None = None,
    durations: bool = False,
) -> str:
    """Lines over the time ``window`` (epoch seconds), a legend, one tooltip per line.

    ``y_max`` fixes the top of the value axis (1.0 for a share). ``durations``
    says the values are seconds: the axis is then labelled in the unit that reads
    best. Points that are not finite break a line; a point with no neighbour is
    drawn as a dot so that it is not lost. Series without points stay out of the
    legend; with none at all the chart says so, over the same window.
    """
    drawn = [
        Series(s.name, tuple(sorted((t, v) for t, v in s.points if math.isfinite(t))))
        for s in series
    ]
    drawn = [s for s in drawn if any(math.isfinite(v) for _, v in s.points)]
    scale, unit = duration_unit([v for s in drawn for _, v in s.points]) if durations else (1, "")
    figure, axes = _figure(3.3)
    _time_axis(axes, window)
    axes.set_ylabel(plain(f"{y_label} ({unit})" if durations else y_label))
    tips: list[str] = []
    for index, one in enumerate(drawn):
        xs = [_x(t) for t, _ in one.points]
        ys = [v / scale for _, v in one.points]
        colour = PALETTE[index % len(PALETTE)]
        (line,) = axes.plot(
            xs, ys, linewidth=1.8, label=plain(one.name), color=colour, linestyle=_dash(index)
        )
        line.set_gid(f"tip-{len(tips)}")
        tips.append(_line_tip(one, scale, unit))
        alone = [(x, y) for i, (x, y) in enumerate(zip(xs, ys, strict=True)) if _isolated(ys, i)]
        if alone:
            (dots,) = axes.plot(
                *zip(*alone, strict=True), "o", markersize=4, color=colour, clip_on=False
            )
            dots.set_gid(f"dots-{index}")
    if y_max is not None:
        axes.set_ylim(0, y_max * 1.02)
    else:
        axes.set_ylim(bottom=0)
    if drawn:
        axes.legend(loc="upper left", fontsize=9, frameon=False, ncols=min(len(drawn), 4))
    else:
        axes.text(0.5, 0.5, "No data for this interval.", transform=axes.transAxes, ha="center")
    axes.set_title(plain(title), fontsize=12, fontweight="bold")
    return _svg(figure, axes, title, window, tips)


def _isolated(ys: Sequence[float], i: int) -> bool:
    def finite(j: int) -> bool:
        return 0 <= j < len(ys) and math.isfinite(ys[j])

    return finite(i) and not finite(i - 1) and not finite(i + 1)


def _line_tip(one: Series, scale: float, unit: str) -> str:
    finite = [(t, v) for t, v in one.points if math.isfinite(v)]
    top_t, top_v = max(finite, key=lambda p: p[1])
    shown = span_of(top_v) if unit else f"{top_v:,.4g}"
    return f"{one.name}: highest {shown} at {utc(top_t)}"


# --- Gantt chart -----------------------------------------------------------------------


def gantt_chart(rows: Sequence[GanttRow], *, start: float, end: float, title: str) -> str:
    """One row per system, its spans coloured by usage state, clipped to ``[start, end]``.

    Each span has its tooltip (a row has one when there are very many); states
    other than the six usages are grey.
    """
    from matplotlib.patches import Patch, PathPatch, Rectangle

    if not end > start:
        raise ValueError(f"the interval ends ({utc(end)}) before it starts ({utc(start)})")
    figure, axes = _figure(1.9 + ROW_IN * max(len(rows), 1), width=GANTT_WIDTH_IN)
    _time_axis(axes, (start, end))
    states = list(USAGE_COLOURS)
    if any(s.state not in USAGE_COLOURS for r in rows for s in r.spans):
        states.append("other")
    per_span = sum(len(r.spans) for r in rows) <= MAX_TIPS
    tips: list[str] = []
    merged: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for index, row in enumerate(rows):
        y = len(rows) - 1 - index
        for span in row.spans:
            x0, x1 = _x(max(span.start, start)), _x(min(span.end, end))
            if x1 <= x0:
                continue
            if not per_span:
                merged[span.state].append((x0, x1, y))
                continue
            bar = Rectangle((x0, y - 0.38), x1 - x0, 0.76, color=_state_colour(span.state))
            bar.set_gid(f"tip-{len(tips)}")
            tips.append(span.tooltip)
            axes.add_patch(bar)
    # Thousands of spans: one shape per state, or drawing them would take seconds.
    for state, bars in sorted(merged.items()):
        shape = PathPatch(_bars_path(bars), facecolor=_state_colour(state), edgecolor="none")
        shape.set_gid(f"tip-{len(tips)}")
        tips.append(f"{state}: {len(bars)} spans")
        shape.set_transform(axes.transData)
        axes.add_artist(shape)  # not add_patch: the limits are set, and measuring them is slow
    axes.set_yticks(range(len(rows)), [plain(_short(r.label)) for r in reversed(rows)], fontsize=9)
    axes.set_ylim(-0.6, max(len(rows), 1) - 0.4)
    axes.grid(axis="y", visible=False)
    if not rows:
        axes.text(0.5, 0.5, "No systems to show.", transform=axes.transAxes, ha="center")
    handles = [Patch(color=_state_colour(s), label=s) for s in states]
    figure.suptitle(plain(title), fontsize=12, fontweight="bold")
    figure.legend(
        handles=handles, loc="outside lower center", ncols=len(handles), fontsize=9, frameon=False
    )
    return _svg(figure, axes, title, (start, end), tips)


def _bars_path(bars: Sequence[tuple[float, float, float]]) -> Path:
    """One path of many bars ``(x0, x1, row)``."""
    from matplotlib.path import Path

    vertices: list[tuple[float, float]] = []
    for x0, x1, y in bars:
        lo, hi = y - 0.38, y + 0.38
        vertices += [(x0, lo), (x1, lo), (x1, hi), (x0, hi), (x0, lo)]
    codes = [Path.MOVETO, Path.LINETO, Path.LINETO, Path.LINETO, Path.CLOSEPOLY] * len(bars)
    return Path(vertices, codes)


def _short(label: str, room: int = 28) -> str:
    return label if len(label) <= room else label[: room - 1] + "…"


def _state_colour(state: str) -> str:
    return USAGE_COLOURS.get(state, OTHER_COLOUR)


# --- shared pieces ---------------------------------------------------------------------


def _figure(height: float, width: float = WIDTH_IN) -> tuple[Figure, Axes]:
    import matplotlib
    from matplotlib.figure import Figure

    # Text stays text in the SVG (not glyph outlines), and ids come out the same every
    # run. These only change SVG output; the simulator's plots are PNG.
    matplotlib.rcParams["svg.fonttype"] = "none"
    matplotlib.rcParams["svg.hashsalt"] = "labq"
    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    axes = figure.add_subplot()
    axes.grid(color="#e4e4e4", linewidth=0.8)
    axes.set_axisbelow(True)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    return figure, axes


def _x(seconds: float) -> float:
    """Epoch seconds as matplotlib's date numbers (days since 1970-01-01)."""
    return seconds / DAY


def _time_axis(axes: Axes, window: tuple[float, float]) -> None:
    from matplotlib import dates as mdates

    start, end = window
    if not end > start:
        raise ValueError(f"the window ends ({utc(end)}) before it starts ({utc(start)})")
    locator = mdates.AutoDateLocator(tz=UTC, minticks=4, maxticks=8)  # type: ignore[no-untyped-call]
    # The date (or year) the ticks share is written once at the axis' end, with the zone.
    offsets = ["UTC", "%Y UTC", "%Y-%m UTC", "%Y-%m-%d UTC", "%Y-%m-%d UTC", "%Y-%m-%d %H:%M UTC"]
    formatter = mdates.ConciseDateFormatter(  # type: ignore[no-untyped-call]
        locator,
        tz=UTC,
        formats=["%Y", "%b", "%d %b", "%H:%M", "%H:%M", "%H:%M:%S"],
        zero_formats=["", "%Y", "%b %Y", "%d %b", "%H:%M", "%H:%M"],
        offset_formats=offsets,
    )
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(formatter)
    axes.set_xlim(_x(start), _x(end))


def _dash(index: int) -> str:
    return DASHES[(index // len(PALETTE)) % len(DASHES)]


def _svg(
    figure: Figure, axes: Axes, title: str, window: tuple[float, float], tips: Sequence[str]
) -> str:
    """The figure as an SVG element to put in a page: ids of its own, the window on it."""
    out = io.StringIO()
    figure.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
    lo, hi = axes.get_xlim()
    ticks = [t * DAY for t in axes.get_xticks() if lo - 1e-9 <= t <= hi + 1e-9]
    svg = out.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, count=1, flags=re.S)
    # Several charts share one page: each one's ids must be its own.
    prefix = f"c{next(_ids)}-"
    svg = re.sub(r'(id="|url\(#|href="#)', rf"\g<1>{prefix}", svg)
    for index, tip in enumerate(tips):
        svg = svg.replace(
            f'<g id="{prefix}tip-{index}">',
            f'<g id="{prefix}tip-{index}" class="tip"><title>{text(tip)}</title>',
            1,
        )
    svg = svg.replace("'DejaVu Sans'", "'DejaVu Sans', system-ui, sans-serif")
    start, end = window
    attributes = (
        f'<svg class="labq-chart" role="img" aria-label="{text(title)}" '
        f'data-window-start="{_iso(start)}" data-window-end="{_iso(end)}" '
        f'data-x-ticks="{" ".join(_iso(t) for t in ticks)}" '
        f'preserveAspectRatio="xMinYMin meet" style="max-width:100%;height:auto" '
    )
    svg = svg.replace("<svg ", attributes, 1)
    return svg.replace(">", f"><title>{text(title)}</title>", 1)


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(round(seconds), UTC).isoformat()
