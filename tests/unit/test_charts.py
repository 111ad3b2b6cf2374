"""Inline SVG charts: well-formed, escaped, readable axes, one tooltip per thing drawn."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labq.web.charts import (
    DASHES,
    OTHER_COLOUR,
    PALETTE,
    USAGE_COLOURS,
    GanttRow,
    GanttSpan,
    Series,
    gantt_chart,
    line_chart,
    time_ticks,
    value_ticks,
)

SVG = "{http://www.w3.org/2000/svg}"
T0 = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
HOUR = 3600.0


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def texts(root: ET.Element) -> list[str]:
    """What each text element shows (a tooltip inside one is not shown)."""
    return [(t.text or "") + "".join(c.tail or "" for c in t) for t in root.iter(f"{SVG}text")]


def tooltips(root: ET.Element, tag: str) -> list[str]:
    return [el.findtext(f"{SVG}title") or "" for el in root.iter(f"{SVG}{tag}")]


def hourly(name: str, *values: float) -> Series:
    return Series(name, tuple((T0 + i * HOUR, v) for i, v in enumerate(values)))


def test_a_line_chart_has_axes_a_legend_and_a_tooltip_per_point() -> None:
    svg = line_chart(
        [hourly("perf", 0.25, 0.5, 1.0), hourly("lab1", 0.0, 0.1, 0.2)],
        title="Utilisation",
        y_label="share busy",
        y_max=1.0,
    )
    root = parse(svg)
    assert root.findtext(f"{SVG}title") == "Utilisation"
    words = texts(root)
    assert {"Utilisation", "share busy", "perf", "lab1"} <= set(words)
    assert {"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"} <= set(words)  # y ticks up to y_max
    assert {"00:00", "01:00", "02:00", "2026-01-01"} <= set(words)  # time ticks, UTC
    points = tooltips(root, "circle")
    assert len(points) == 6
    assert "perf: 0.5 at 2026-01-01 01:00:00 UTC" in points
    assert tooltips(root, "polyline") == ["perf", "lab1"]
    colours = [line.get("stroke") for line in root.iter(f"{SVG}polyline")]
    assert colours == list(PALETTE[:2])


def test_nothing_to_draw_says_so() -> None:
    for series in ([], [Series("perf", ())], [Series("x", ((T0, float("nan")),))]):
        root = parse(line_chart(series, title="Queue", y_label="sets"))
        assert "No data for this interval." in texts(root)
        assert not list(root.iter(f"{SVG}polyline"))


def test_every_text_is_escaped() -> None:
    nasty = '<script>alert("x")</script> & \x00\x07'
    svg = line_chart([hourly(nasty, 1, 2)], title=nasty, y_label=nasty)
    assert "<script>" not in svg
    root = parse(svg)
    assert '<script>alert("x")</script> & ' in texts(root)
    gantt = gantt_chart(
        [GanttRow(nasty, (GanttSpan(T0, T0 + 60, nasty, nasty),))], start=T0, end=T0 + 60, title="t"
    )
    assert "<script>" not in gantt
    parse(gantt)


def test_values_above_the_fixed_top_are_drawn_at_the_top_and_told_true() -> None:
    root = parse(line_chart([hourly("x", 0.5, 3.0)], title="t", y_label="y", y_max=1.0))
    top = min(float(c.get("cy", "0")) for c in root.iter(f"{SVG}circle"))
    frame = next(r for r in root.iter(f"{SVG}rect") if r.get("fill") == "none")
    assert top == pytest.approx(float(frame.get("y", "0")))
    assert "x: 3 at 2026-01-01 01:00:00 UTC" in tooltips(root, "circle")


def test_many_lines_stay_apart_by_dash_once_colours_run_out() -> None:
    series = [hourly(f"pool{i}", i, i + 1) for i in range(len(PALETTE) + 2)]
    root = parse(line_chart(series, title="t", y_label="y"))
    styles = [
        (line.get("stroke"), line.get("stroke-dasharray")) for line in root.iter(f"{SVG}polyline")
    ]
    assert len(set(styles)) == len(series)
    assert styles[len(PALETTE)] == (PALETTE[0], DASHES[1])


def test_a_single_moment_still_makes_a_chart() -> None:
    root = parse(line_chart([Series("x", ((T0, 2.0),))], title="t", y_label="y"))
    assert len(list(root.iter(f"{SVG}circle"))) == 1


def test_a_gantt_chart_colours_spans_by_state_and_clips_them() -> None:
    rows = [
        GanttRow(
            "s1.lab",
            (
                GanttSpan(T0 - HOUR, T0 + HOUR, "running", "s1: running, recipe 4"),
                GanttSpan(T0 + HOUR, T0 + 2 * HOUR, "idle", "s1: idle"),
                GanttSpan(T0 + 5 * HOUR, T0 + 6 * HOUR, "waiting", "after the end"),
            ),
        ),
        GanttRow("s2.lab", (GanttSpan(T0, T0 + 2 * HOUR, "repairing", "odd"),)),
        GanttRow("s3.lab", ()),
    ]
    root = parse(gantt_chart(rows, start=T0, end=T0 + 2 * HOUR, title="Systems"))
    spans = [r for r in root.iter(f"{SVG}rect") if r.get("data-state")]
    assert [r.get("data-state") for r in spans] == ["running", "idle", "repairing"]
    assert [r.get("fill") for r in spans] == [
        USAGE_COLOURS["running"],
        USAGE_COLOURS["idle"],
        OTHER_COLOUR,
    ]
    running, idle, _ = spans
    # the first span is clipped at the start: it fills half of the plot
    left = float(running.get("x", "0"))
    assert float(running.get("width", "0")) == pytest.approx(float(idle.get("width", "0")))
    assert float(idle.get("x", "0")) == pytest.approx(left + float(running.get("width", "0")))
    assert "s1: running, recipe 4" in [r.findtext(f"{SVG}title") for r in spans]
    words = texts(root)
    assert {"s1.lab", "s2.lab", "s3.lab", "other", *USAGE_COLOURS} <= set(words)


def test_a_long_label_is_shortened_but_kept_in_its_tooltip() -> None:
    label = "a-very-long-system-name-that-goes-on." * 3
    root = parse(gantt_chart([GanttRow(label, ())], start=T0, end=T0 + HOUR, title="Systems"))
    shown = next(t for t in root.iter(f"{SVG}text") if t.findtext(f"{SVG}title") == label)
    (seen,) = [t for t in texts(root) if t.startswith("a-very")]
    assert seen.endswith("…")
    assert len(seen) < len(label)
    assert shown is not None


def test_a_gantt_chart_with_nothing_to_show_says_so() -> None:
    assert "No systems to show." in texts(parse(gantt_chart([], start=T0, end=T0 + 1, title="S")))
    row = [GanttRow("s1", ())]
    assert "The interval is empty." in texts(parse(gantt_chart(row, start=T0, end=T0, title="S")))


def test_hundreds_of_systems_render_quickly() -> None:
    rows = [
        GanttRow(
            f"system-{i}.lab.example.com",
            tuple(
                GanttSpan(T0 + j * 600, T0 + j * 600 + 500, "running", f"recipe {j}")
                for j in range(48)
            ),
        )
        for i in range(500)
    ]
    began = time.perf_counter()
    svg = gantt_chart(rows, start=T0, end=T0 + 8 * HOUR, title="Systems")
    assert time.perf_counter() - began < 2.0
    assert len([r for r in parse(svg).iter(f"{SVG}rect") if r.get("data-state")]) == 500 * 48


@given(
    lo=st.floats(min_value=1e9, max_value=2e9, allow_nan=False),
    span=st.floats(min_value=1.0, max_value=5 * 365 * 86400.0),
)
def test_time_ticks_are_round_evenly_spaced_and_inside(lo: float, span: float) -> None:
    ticks = time_ticks(lo, lo + span)
    assert 1 <= len(ticks) <= 7
    assert all(lo <= t <= lo + span for t in ticks)
    steps = {round(b - a, 6) for a, b in pairwise(ticks)}
    assert len(steps) <= 1
    for step in steps:
        assert all(t % step == 0 for t in ticks)


@given(
    lo=st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
    span=st.floats(min_value=1e-3, max_value=1e7),
)
def test_value_ticks_cover_the_range_in_few_steps(lo: float, span: float) -> None:
    ticks, decimals = value_ticks(lo, lo + span)
    slack = 1e-9 * max(1.0, abs(lo), abs(lo + span))
    assert ticks[0] <= lo + slack
    assert ticks[-1] >= lo + span - slack
    assert 2 <= len(ticks) <= 12
    assert 0 <= decimals <= 6
