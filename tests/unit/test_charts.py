"""Charts drawn by matplotlib as inline SVG: over the window given, lines drawn, text escaped."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

import pytest

from labq.web.charts import (
    PALETTE,
    USAGE_COLOURS,
    GanttRow,
    GanttSpan,
    Series,
    duration_unit,
    gantt_chart,
    line_chart,
)

SVG = "{http://www.w3.org/2000/svg}"
T0 = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
HOUR = 3600.0
SIX_HOURS = (T0, T0 + 6 * HOUR)


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def texts(root: ET.Element) -> list[str]:
    """What each text element shows."""
    return ["".join(t.itertext()).strip() for t in root.iter(f"{SVG}text")]


def tips(root: ET.Element) -> list[str]:
    """The tooltips of the things drawn (not the chart's own title)."""
    return [
        g.findtext(f"{SVG}title") or "" for g in root.iter(f"{SVG}g") if g.get("class") == "tip"
    ]


def ticks(root: ET.Element) -> list[datetime]:
    return [datetime.fromisoformat(t) for t in root.get("data-x-ticks", "").split()]


def vertices(root: ET.Element) -> list[int]:
    """How many points each drawn line joins."""
    out = []
    for group in root.iter(f"{SVG}g"):
        if group.get("class") == "tip":
            path = group.find(f"{SVG}path")
            assert path is not None
            out.append(len(re.findall(r"[ML] ", path.get("d", ""))))
    return out


def every_ten_minutes(name: str, values: list[float], start: float = T0) -> Series:
    return Series(name, tuple((start + (i + 1) * 600, v) for i, v in enumerate(values)))


def test_a_line_chart_spans_the_window_given_not_its_data() -> None:
    # data only in the last ten minutes of six hours: the axis still covers the six hours
    late = every_ten_minutes("perf", [0.5, 0.75], start=T0 + 6 * HOUR - 1200)
    root = parse(line_chart([late], title="Utilisation", y_label="busy share", window=SIX_HOURS))
    assert root.get("data-window-start") == "2026-01-01T00:00:00+00:00"
    assert root.get("data-window-end") == "2026-01-01T06:00:00+00:00"
    shown = ticks(root)
    assert len(shown) >= 4
    assert shown[0] <= datetime(2026, 1, 1, 1, tzinfo=UTC)  # not a two-minute zoom
    assert all(
        datetime(2026, 1, 1, tzinfo=UTC) <= t <= datetime(2026, 1, 1, 6, tzinfo=UTC) for t in shown
    )
    words = texts(root)
    assert {"Utilisation", "busy share", "perf", "02:00", "2026-01-01 UTC"} <= set(words)
    assert not any("1970" in w for w in words)


def test_a_series_is_drawn_as_one_line_through_its_points() -> None:
    queue = every_ten_minutes("all", [float(i % 4) for i in range(35)])
    root = parse(line_chart([queue], title="Queue length", y_label="sets", window=SIX_HOURS))
    assert vertices(root) == [35]
    assert tips(root) == ["all: highest 3 at 2026-01-01 00:40:00 UTC"]


def test_a_gap_breaks_the_line_and_a_lone_point_is_still_seen() -> None:
    nan = float("nan")
    wait = every_ten_minutes("all", [10, 20, nan, 30, nan, 40, 50])
    svg = line_chart([wait], title="Mean wait", y_label="wait", window=SIX_HOURS, durations=True)
    root = parse(svg)
    assert "wait (seconds)" in texts(root)
    (dots,) = re.findall(r'id="[^"]*dots-0">(.*?)</g>', svg, re.S)
    assert dots.count("<use ") == 1  # the lone point (30 s) gets a marker; lines do not
    assert vertices(root) == [5]  # one line through the five points, broken at the gaps
    (line,) = re.findall(r'class="tip"><title>[^<]*</title>\s*<path d="([^"]+)"', svg)
    assert line.count("M ") == 3


def test_nothing_to_draw_says_so_over_the_same_window() -> None:
    for series in ([], [Series("perf", ())], [Series("x", ((T0, float("nan")),))]):
        root = parse(line_chart(series, title="Queue", y_label="sets", window=SIX_HOURS))
        assert "No data for this interval." in texts(root)
        assert root.get("data-window-end") == "2026-01-01T06:00:00+00:00"
        assert vertices(root) == []


def test_durations_are_labelled_in_the_unit_that_reads_best() -> None:
    assert duration_unit([30.0, 90.0]) == (1.0, "seconds")
    assert duration_unit([30.0, 600.0]) == (60.0, "minutes")
    assert duration_unit([9000.0]) == (3600.0, "hours")
    hours = every_ten_minutes("all", [3600.0, 7200.0, 10800.0])
    root = parse(line_chart([hours], title="w", y_label="wait", window=SIX_HOURS, durations=True))
    assert "wait (hours)" in texts(root)
    assert "all: highest 3\xa0h at 2026-01-01 00:30:00 UTC" in tips(root)


def test_every_text_is_escaped() -> None:
    nasty = '<script>alert("x")</script> & \x00\x07'
    svg = line_chart([every_ten_minutes(nasty, [1, 2])], title=nasty, y_label="y", window=SIX_HOURS)
    assert "<script>" not in svg
    root = parse(svg)
    assert root.get("aria-label") == '<script>alert("x")</script> & '
    assert '<script>alert("x")</script> &' in texts(root)
    money = line_chart([every_ten_minutes("$x$", [1])], title="t", y_label="y", window=SIX_HOURS)
    assert "$x$" in texts(parse(money))  # drawn as written, not as mathematics
    gantt = gantt_chart(
        [GanttRow(nasty, (GanttSpan(T0, T0 + 60, nasty, nasty),))], start=T0, end=T0 + 60, title="t"
    )
    assert "<script>" not in gantt
    parse(gantt)


def test_many_lines_stay_apart_by_dash_once_colours_run_out() -> None:
    series = [every_ten_minutes(f"pool{i}", [i, i + 1]) for i in range(len(PALETTE) + 2)]
    svg = line_chart(series, title="t", y_label="y", window=SIX_HOURS)
    strokes = re.findall(r'<g id="[^"]+" class="tip">.*?style="([^"]*)"', svg, re.S)
    assert len(strokes) == len(series)
    assert len(set(strokes)) == len(series)
    assert "dasharray" in strokes[len(PALETTE)]
    assert PALETTE[0].lower() in strokes[len(PALETTE)]


def test_charts_of_one_page_keep_ids_of_their_own() -> None:
    one = line_chart([every_ten_minutes("a", [1, 2])], title="a", y_label="y", window=SIX_HOURS)
    two = line_chart([every_ten_minutes("a", [1, 2])], title="a", y_label="y", window=SIX_HOURS)
    ids = [set(re.findall(r'id="([^"]+)"', svg)) for svg in (one, two)]
    assert ids[0]
    assert not ids[0] & ids[1]
    for svg, own in zip((one, two), ids, strict=True):  # every reference stays inside its chart
        assert set(re.findall(r'(?:url\(#|href="#)([^)"]+)', svg)) <= own


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
    svg = gantt_chart(rows, start=T0, end=T0 + 2 * HOUR, title="Systems")
    root = parse(svg)
    assert tips(root) == ["s1: running, recipe 4", "s1: idle", "odd"]
    assert root.get("data-window-end") == "2026-01-01T02:00:00+00:00"
    colours = re.findall(r'class="tip">.*?fill: (#[0-9a-f]+)', svg, re.S)
    assert colours == [USAGE_COLOURS["running"].lower(), USAGE_COLOURS["idle"].lower(), "#777777"]
    words = texts(root)
    assert {"s1.lab", "s2.lab", "s3.lab", "other", *USAGE_COLOURS} <= set(words)


def test_a_long_label_is_shortened() -> None:
    label = "a-very-long-system-name-that-goes-on." * 3
    root = parse(gantt_chart([GanttRow(label, ())], start=T0, end=T0 + HOUR, title="Systems"))
    (seen,) = [t for t in texts(root) if t.startswith("a-very")]
    assert seen.endswith("…")
    assert len(seen) < len(label)


def test_a_gantt_chart_with_nothing_to_show_says_so() -> None:
    assert "No systems to show." in texts(parse(gantt_chart([], start=T0, end=T0 + 1, title="S")))
    with pytest.raises(ValueError, match="before it starts"):
        gantt_chart([GanttRow("s1", ())], start=T0, end=T0, title="S")


def test_hundreds_of_systems_are_drawn_as_one_shape_per_state() -> None:
    rows = [
        GanttRow(
            f"system-{i}.lab.example.com",
            tuple(
                GanttSpan(T0 + j * 600, T0 + j * 600 + 500, "running", f"recipe {j}")
                for j in range(48)
            ),
        )
        for i in range(120)
    ]
    root = parse(gantt_chart(rows, start=T0, end=T0 + 8 * HOUR, title="Systems"))
    assert tips(root) == ["running: 5760 spans"]
    assert "system-119.lab.example.com" in texts(root)
