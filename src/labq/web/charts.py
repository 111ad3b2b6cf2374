"""Charts as inline SVG, drawn on the server: no chart library, nothing fetched at run time.

Pure functions of plain values (no database, no clock): a page embeds the
string as it is, and a test reads it as XML. Every piece of text is escaped.
Colours come from the Okabe–Ito palette, which stays distinguishable with the
common colour-vision deficiencies; past its eight colours, lines also change
their dash pattern. Times are epoch seconds and are labelled in UTC.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from typing import Final, TypeAlias

WIDTH: Final = 760
FONT: Final = 'font-family="system-ui, sans-serif" font-size="12"'
CHAR_WIDTH: Final = 7.0  # a fair guess at one character of the 12 px font
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
DASHES: Final = ("", "7 3", "2 3", "9 3 2 3")
USAGE_COLOURS: Final = {
    "idle": "#DDDDDD",
    "pending": "#F0E442",
    "scheduled": "#56B4E9",
    "waiting": "#E69F00",
    "installing": "#CC79A7",
    "running": "#009E73",
}
OTHER_COLOUR: Final = "#777777"
ROW_HEIGHT: Final = 18.0  # one system in a Gantt chart
BAR: Final = 14.0
MAX_MARKERS: Final = 1500  # past this many points, tooltips are per series, not per point
MONTHS: Final = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
DAY: Final = 86400
# Tick steps that read well on a time axis, in seconds.
TIME_STEPS: Final = (
    1, 2, 5, 10, 15, 30,
    60, 120, 300, 600, 900, 1800,
    3600, 7200, 10800, 21600, 43200,
    DAY, 2 * DAY, 7 * DAY, 14 * DAY, 28 * DAY, 91 * DAY, 182 * DAY, 364 * DAY,
)  # fmt: skip
_Scale: TypeAlias = Callable[[float], float]  # data to pixels on one axis
_NOT_XML: Final = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


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
            parts.append(f"{amount} {unit}")
    return " ".join(parts[:2])


def number(value: float) -> str:
    """A value for a tooltip: whole numbers plain, others to four significant digits."""
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.4g}"


# --- axes ------------------------------------------------------------------------------


def time_ticks(lo: float, hi: float, target: int = 6) -> list[float]:
    """Round moments (whole minutes, hours, days, …) between ``lo`` and ``hi``."""
    span = max(hi - lo, 1.0)
    step = next((s for s in TIME_STEPS if span / s <= target), None)
    if step is None:
        step = math.ceil(span / target / TIME_STEPS[-1]) * TIME_STEPS[-1]
    first = math.ceil(lo / step) * step
    count = int((hi - first) // step) + 1
    return [float(first + i * step) for i in range(max(count, 0))]


def time_labels(ticks: Sequence[float]) -> list[tuple[str, str]]:
    """Two lines per tick: the time (or day), and the date (or year) where it changes."""
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 3600.0
    out: list[tuple[str, str]] = []
    before = ""
    for tick in ticks:
        moment = datetime.fromtimestamp(tick, UTC)
        if step >= DAY:
            top, below = f"{moment.day} {MONTHS[moment.month - 1]}", str(moment.year)
        else:
            top = moment.strftime("%H:%M:%S" if step < 60 else "%H:%M")
            below = moment.strftime("%Y-%m-%d")
        out.append((top, below if below != before else ""))
        before = below
    return out


def value_ticks(lo: float, hi: float, target: int = 5) -> tuple[list[float], int]:
    """Steps of 1, 2, 2.5 or 5 × 10ⁿ covering ``[lo, hi]``, and the decimals they need."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / target
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw * (1 - 1e-9))
    first = math.floor(lo / step + 1e-9)
    last = math.ceil(hi / step - 1e-9)
    decimals = next((d for d in range(7) if abs(round(step, d) - step) < step * 1e-6), 6)
    return [i * step for i in range(first, last + 1)], decimals


# --- line chart ------------------------------------------------------------------------


def line_chart(
    series: Sequence[Series], *, title: str, y_label: str, y_max: float | None = None
) -> str:
    """Lines over time with time and value axes, a legend and a tooltip per point.

    ``y_max`` fixes the top of the value axis (1.0 for a share); values above it
    are drawn at the top, their tooltips keep the true value. Points that are
    not finite numbers are left out; series without points stay out of the legend.
    """
    drawn = [
        (s.name, sorted((t, v) for t, v in s.points if math.isfinite(t) and math.isfinite(v)))
        for s in series
    ]
    drawn = [(name, points) for name, points in drawn if points]
    if not drawn:
        return _empty(title, "No data for this interval.")
    times = [t for _, points in drawn for t, _ in points]
    values = [v for _, points in drawn for _, v in points]
    t_lo, t_hi = min(times), max(times)
    if t_hi - t_lo < 1:
        t_lo, t_hi = t_lo - 60, t_hi + 60
    fixed = y_max is not None and y_max > 0
    ceiling = y_max if y_max is not None and fixed else max(values)
    y_ticks, decimals = value_ticks(min(0.0, *values), ceiling)
    if fixed:
        y_ticks = [y for y in y_ticks if y <= ceiling * (1 + 1e-9)]
    y_lo, y_hi = y_ticks[0], (ceiling if fixed else y_ticks[-1])

    legend, legend_height = _legend([(_colour(i), _dash(i), n) for i, (n, _) in enumerate(drawn)])
    left, right, top = 70.0, WIDTH - 20.0, 40.0
    bottom = top + 240.0
    height = bottom + 44 + legend_height

    def x_of(t: float) -> float:
        return left + (t - t_lo) / (t_hi - t_lo) * (right - left)

    def y_of(v: float) -> float:
        v = min(max(v, y_lo), y_hi)
        return bottom - (v - y_lo) / (y_hi - y_lo) * (bottom - top)

    out = [_open(title, height), _title(title)]
    out.append(f'<g class="y-axis" {FONT} text-anchor="end" fill="#333">')
    for y in y_ticks:
        py = y_of(y)
        out.append(
            f'<line x1="{left:.1f}" x2="{right:.1f}" y1="{py:.1f}" y2="{py:.1f}" '
            f'stroke="#e4e4e4"/><text x="{left - 6:.1f}" y="{py + 4:.1f}">{y:,.{decimals}f}</text>'
        )
    middle = (top + bottom) / 2
    out.append(
        f'<text x="14" y="{middle:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {middle:.1f})">{text(y_label)}</text></g>'
    )
    out.append(_time_axis(time_ticks(t_lo, t_hi), x_of, top, bottom))
    out.append(
        f'<rect x="{left:.1f}" y="{top:.1f}" width="{right - left:.1f}" '
        f'height="{bottom - top:.1f}" fill="none" stroke="#999"/>'
    )
    markers = len(times) <= MAX_MARKERS
    for i, (name, points) in enumerate(drawn):
        out.append(_line(name, points, _colour(i), _dash(i), x_of, y_of, markers=markers))
    out.append(f'<g transform="translate(0 {bottom + 44:.1f})">{legend}</g>')
    out.append("</svg>")
    return "".join(out)


def _line(
    name: str,
    points: list[tuple[float, float]],
    colour: str,
    dash: str,
    x_of: _Scale,
    y_of: _Scale,
    *,
    markers: bool,
) -> str:
    label = text(name)
    coords = " ".join(f"{x_of(t):.1f},{y_of(v):.1f}" for t, v in points)
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    out = [
        f'<g class="series" data-name="{label}"><polyline points="{coords}" fill="none" '
        f'stroke="{colour}" stroke-width="2"{dashed}><title>{label}</title></polyline>'
    ]
    if markers:
        for t, v in points:
            out.append(
                f'<circle cx="{x_of(t):.1f}" cy="{y_of(v):.1f}" r="3" fill="{colour}">'
                f"<title>{label}: {text(number(v))} at {text(utc(t))}</title></circle>"
            )
    out.append("</g>")
    return "".join(out)


# --- Gantt chart -----------------------------------------------------------------------


def gantt_chart(rows: Sequence[GanttRow], *, start: float, end: float, title: str) -> str:
    """One row per system, its spans coloured by usage state, clipped to ``[start, end]``.

    Each span has its tooltip; states other than the six usages are grey. Spans
    too short to see at this scale (under a twentieth of a pixel) are left out.
    """
    if not rows:
        return _empty(title, "No systems to show.")
    if not end > start:
        return _empty(title, "The interval is empty.")
    longest = max(len(r.label) for r in rows)
    label_width = min(max(longest * CHAR_WIDTH + 12, 60.0), 220.0)
    axis = _TimeAxis(8 + label_width, WIDTH - 20.0, start, end)
    states = list(USAGE_COLOURS)
    if any(s.state not in USAGE_COLOURS for r in rows for s in r.spans):
        states.append("other")
    legend, legend_height = _legend([(_state_colour(s), "", s) for s in states], swatch=True)
    tall = len(rows) > 15  # time labels above the rows too, not only far below
    top = 40.0 + legend_height + (26 if tall else 8)
    bottom = top + ROW_HEIGHT * len(rows)
    room = int((label_width - 12) // CHAR_WIDTH)

    out = [_open(title, bottom + 44), _title(title)]
    out.append(f'<g transform="translate(0 36)">{legend}</g>')
    ticks = time_ticks(start, end)
    out.append(_time_axis(ticks, axis.x, top, bottom))
    if tall:
        out.append(f'<g class="x-axis-top" {FONT} text-anchor="middle" fill="#333">')
        for tick, (upper, _) in zip(ticks, time_labels(ticks), strict=True):
            out.append(f'<text x="{axis.x(tick):.1f}" y="{top - 6:.1f}">{text(upper)}</text>')
        out.append("</g>")
    out.append(f'<g class="rows" {FONT}>')
    for i, row in enumerate(rows):
        out.append(_gantt_row(row, i, top + i * ROW_HEIGHT, axis, room))
    out.append("</g>")
    out.append(
        f'<rect x="{axis.left:.1f}" y="{top:.1f}" width="{axis.right - axis.left:.1f}" '
        f'height="{bottom - top:.1f}" fill="none" stroke="#999"/></svg>'
    )
    return "".join(out)


@dataclass(frozen=True)
class _TimeAxis:
    """``[start, end]`` in seconds drawn from pixel ``left`` to ``right``."""

    left: float
    right: float
    start: float
    end: float

    def x(self, t: float) -> float:
        return self.left + (t - self.start) * (self.right - self.left) / (self.end - self.start)


def _gantt_row(row: GanttRow, index: int, y: float, axis: _TimeAxis, room: int) -> str:
    label = row.label if len(row.label) <= room else row.label[: max(room - 1, 1)] + "…"
    out = [f'<g class="row" data-label="{text(row.label)}">']
    if index % 2:
        out.append(
            f'<rect x="{axis.left:.1f}" y="{y:.1f}" width="{axis.right - axis.left:.1f}" '
            f'height="{ROW_HEIGHT:.0f}" fill="#f6f6f6"/>'
        )
    out.append(
        f'<text x="{axis.left - 6:.1f}" y="{y + 13:.1f}" text-anchor="end" fill="#333">'
        f"<title>{text(row.label)}</title>{text(label)}</text>"
    )
    for span in row.spans:
        x0, x1 = axis.x(max(span.start, axis.start)), axis.x(min(span.end, axis.end))
        if x1 - x0 < 0.05:
            continue
        out.append(
            f'<rect x="{x0:.2f}" y="{y + 2:.1f}" width="{x1 - x0:.2f}" height="{BAR:.0f}" '
            f'fill="{_state_colour(span.state)}" data-state="{text(span.state)}">'
            f"<title>{text(span.tooltip)}</title></rect>"
        )
    out.append("</g>")
    return "".join(out)


# --- shared pieces ---------------------------------------------------------------------


def _open(title: str, height: float) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="labq-chart" role="img" '
        f'aria-label="{text(title)}" width="{WIDTH}" height="{height:.0f}" '
        f'viewBox="0 0 {WIDTH} {height:.0f}" style="max-width:100%;height:auto">'
        f"<title>{text(title)}</title>"
    )


def _title(title: str) -> str:
    return (
        f'<text x="{WIDTH / 2:.0f}" y="22" text-anchor="middle" font-family="system-ui, '
        f'sans-serif" font-size="15" font-weight="600" fill="#222">{text(title)}</text>'
    )


def _empty(title: str, message: str) -> str:
    return (
        f"{_open(title, 120)}{_title(title)}"
        f'<text class="empty" x="{WIDTH / 2:.0f}" y="72" text-anchor="middle" {FONT} '
        f'fill="#666">{text(message)}</text></svg>'
    )


def _time_axis(ticks: Iterable[float], x_of: _Scale, top: float, bottom: float) -> str:
    listed = list(ticks)
    out = [f'<g class="x-axis" {FONT} text-anchor="middle" fill="#333">']
    for tick, (upper, lower) in zip(listed, time_labels(listed), strict=True):
        x = x_of(tick)
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top:.1f}" y2="{bottom + 4:.1f}" '
            f'stroke="#e4e4e4"/><text x="{x:.1f}" y="{bottom + 18:.1f}">{text(upper)}</text>'
        )
        if lower:
            out.append(f'<text x="{x:.1f}" y="{bottom + 32:.1f}">{text(lower)}</text>')
    out.append("</g>")
    return "".join(out)


def _legend(items: Sequence[tuple[str, str, str]], *, swatch: bool = False) -> tuple[str, float]:
    """Legend entries wrapped into rows across the chart; the SVG and its height."""
    out = [f'<g class="legend" {FONT} fill="#333">']
    x, y = 70.0, 0.0
    for colour, dash, name in items:
        width = 30 + len(name) * CHAR_WIDTH + 18
        if x + width > WIDTH - 20 and x > 70:
            x, y = 70.0, y + 18
        if swatch:
            mark = f'<rect x="{x:.1f}" y="{y + 3:.1f}" width="22" height="10" fill="{colour}"/>'
        else:
            dashed = f' stroke-dasharray="{dash}"' if dash else ""
            mark = (
                f'<line x1="{x:.1f}" x2="{x + 22:.1f}" y1="{y + 8:.1f}" y2="{y + 8:.1f}" '
                f'stroke="{colour}" stroke-width="2"{dashed}/>'
            )
        out.append(f'{mark}<text x="{x + 28:.1f}" y="{y + 12:.1f}">{text(name)}</text>')
        x += width
    out.append("</g>")
    return "".join(out), y + 18


def _colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def _dash(index: int) -> str:
    return DASHES[(index // len(PALETTE)) % len(DASHES)]


def _state_colour(state: str) -> str:
    return USAGE_COLOURS.get(state, OTHER_COLOUR)
