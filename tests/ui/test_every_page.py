"""Every page of the UI as a person looks at it, in Chromium, with a lab in mid-work.

One ``labq server`` (SQLite, local backend) of this module's own holds a job
running, jobs queued behind it, a failed job, a retried one, a run, a
reservation, an agent and a what-if comparison. Each page is opened at
1400×1000 and at 800 px wide, saved as ``<page>-<width>.png`` (into
``docs/screenshots/`` with ``LABQ_SCREENSHOTS=1``, as CI does and keeps them;
otherwise into the module's temporary directory, so a run leaves the tree
alone), and checked for what a reader would notice: a date before
2000, a raw ISO time with microseconds, a number that wraps or overflows its
cell, a date field in the browser's local 12-hour time, charts of one page over
different windows or with tick labels outside them.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.acceptance.conftest import running_server
from tests.ui.conftest import TIMEOUT_MS, UiServer, _populate, log_in

ROOT = Path(__file__).parents[2]
SHOTS = ROOT / "docs" / "screenshots"  # written only with LABQ_SCREENSHOTS=1
SIZES = {"wide": (1400, 1000), "narrow": (800, 1000)}
BUSY = {"scheduled", "waiting", "installing", "running"}
ENDED = {"completed", "aborted", "cancelled"}

LONG = """\
whiteboard: long build on {fqdn}
recipe_sets:
  - max_time: 1200
    recipes:
      - host: {{fqdn: {fqdn}}}
        tasks: [{{name: build, run: sleep 600, timeout: 900}}]
"""
BEHIND = """\
whiteboard: waits for {fqdn}
recipe_sets:
  - recipes:
      - host: {{fqdn: {fqdn}}}
        tasks: [{{name: t, run: 'true', timeout: 30}}]
"""
GANG_RECIPE = """\
      - host: {memory_mb: {">=": 4096}}
        tasks: [{name: t, run: 'true', timeout: 30}]
"""
GANG = "whiteboard: a gang of three\nrecipe_sets:\n  - recipes:\n" + GANG_RECIPE * 3
FAILS = """\
whiteboard: a test that fails
recipe_sets:
  - recipes:
      - host: {memory_mb: {">=": 4096}}
        tasks: [{name: check, run: 'echo checking; exit 3', timeout: 30}]
"""
RETRIED = """\
whiteboard: times out, retried once
recipe_sets:
  - max_retries: 1
    recipes:
      - host: {memory_mb: {">=": 4096}}
        tasks: [{name: slow, run: sleep 30, timeout: 1}]
"""
QUICK = "recipe_sets:\n- recipes:\n  - tasks: [{name: t, run: 'true', timeout: 30}]\n"

# What a reader must never see.
OLD_DATE = re.compile(r"\b(1[0-9]{3})-\d\d-\d\d\b|\b19[0-9]{2}\b")
MICROSECONDS = re.compile(r"\d\d:\d\d:\d\d\.\d{3,}")
RAW_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
BARE_OFFSET = re.compile(r"\b\d{5,}(\.\d+)? s\b")  # "recorded at 2591771.2 s"


@dataclass
class BusyLab:
    """The server, the ids of what it holds, and a logged-in admin per screen size."""

    server: UiServer
    jobs: dict[str, int]
    contexts: dict[str, BrowserContext]
    shots: Path  # where the screenshots go


def _wait(server: UiServer, job: int, wanted: set[str], timeout: float = 90) -> None:
    server.wait_for_state(job, wanted, timeout=timeout)


def _wait_holding(server: UiServer, job: int, hold: str, timeout: float = 90) -> None:
    """Until the job's set holds what it can: the reservation below then waits behind it
    (made first, the reservation takes s3 and the gang can only say it is short)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = server.api.get("/queue").json()["queue"]
        if any(r["job_id"] == job and r["hold"].startswith(hold) for r in rows):
            return
        assert time.monotonic() < deadline, f"job {job} never came to {hold!r}: {rows}"
        time.sleep(0.2)


def _mid_work(server: UiServer) -> dict[str, int]:
    """Jobs in every state a lab is in on an ordinary afternoon; their ids by role."""
    jobs: dict[str, int] = {}
    jobs["failed"] = server.submit(FAILS)
    jobs["retried"] = server.submit(RETRIED)
    _wait(server, jobs["failed"], ENDED)
    _wait(server, jobs["retried"], ENDED)
    jobs["running"] = server.submit(LONG.format(fqdn="s1.lab1"))
    _wait(server, jobs["running"], {"running"})
    jobs["queued"] = server.submit(BEHIND.format(fqdn="s1.lab1"))
    jobs["gang"] = server.submit(GANG)
    _wait_holding(server, jobs["gang"], "holding 2 of 3")
    jobs["bobs"] = server.submit(QUICK, token=server.bob_token)
    run = server.api.post(
        "/runs",
        json={"name": "nightly-42", "jobs": [{"name": "a.yaml", "document": QUICK}]},
    )
    assert run.status_code == 201, run.text
    reserved = server.api.post("/systems/s3.lab1/reserve", json={"for": 8 * 3600})
    assert reserved.status_code == 201, reserved.text
    for method, path, body in [
        ("POST", "/labs", {"name": "far"}),
        ("POST", "/agents", {"name": "far-agent", "labs": ["far"]}),
    ]:
        answer = server.api.request(method, path, json=body)
        assert answer.status_code in (200, 201), answer.text
    return jobs


@pytest.fixture(scope="module")
def busy_lab(
    tmp_path_factory: pytest.TempPathFactory, chromium: Path, browser: Browser
) -> Iterator[BusyLab]:
    """The lab in mid-work, and the admin logged in at each size; a what-if made."""
    home = tmp_path_factory.mktemp("busy-lab")
    with running_server(
        f"sqlite:///{home / 'server.db'}", data=home / "data", home=home / "home",
        log=home / "server.log",
    ) as running:  # fmt: skip
        api = httpx.Client(
            base_url=f"{running.url}/api/v1",
            headers={"Authorization": f"Bearer {running.token}"},
            timeout=30,
        )
        contexts: dict[str, BrowserContext] = {}
        jobs: dict[str, int] = {}
        try:
            server = UiServer(running.url, running.token, _populate(api), api, home / "data")
            jobs = _mid_work(server)
            for size, (width, height) in SIZES.items():
                context = browser.new_context(viewport={"width": width, "height": height})
                context.set_default_timeout(TIMEOUT_MS)
                contexts[size] = context
                log_in(context.new_page(), server, running.token)
            _compare(contexts["wide"].new_page(), server)
            shots = SHOTS if os.environ.get("LABQ_SCREENSHOTS") == "1" else home / "screenshots"
            yield BusyLab(server, jobs, contexts, shots)
        finally:
            for context in contexts.values():
                context.close()
            for job in jobs.values():
                api.post(f"/jobs/{job}/cancel", json={"reason": "test over"})
            api.close()
    assert "Traceback" not in running.log.read_text()


def _compare(page: Page, server: UiServer) -> None:
    page.goto(f"{server.url}/ui/whatif")
    page.get_by_role("button", name="Replay under both").click()
    expect(page.get_by_role("heading", name="The last comparison")).to_be_visible()
    page.close()


# --- what a person checks on any page ---------------------------------------------------

SEEN = """() => {
  const shown = document.body.innerText;
  const svgText = [...document.querySelectorAll("svg text")].map(t => t.textContent).join("\\n");
  const cells = [...document.querySelectorAll("td.num, td time, .num time, button")]
    .filter(el => el.offsetParent !== null).map(el => {
    const cell = el.tagName === "BUTTON" ? el : (el.closest("td") || el);
    const range = document.createRange();
    range.selectNodeContents(cell);
    const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
    return {text: cell.innerText, lines: lines.size,
            overflow: cell.scrollWidth - cell.clientWidth};
  });
  const charts = [...document.querySelectorAll("svg.labq-chart")].map(svg => ({
    start: svg.dataset.windowStart, end: svg.dataset.windowEnd,
    ticks: (svg.dataset.xTicks || "").split(" ").filter(Boolean),
    label: svg.getAttribute("aria-label"),
  }));
  const dates = [...document.querySelectorAll("input")]
    .filter(i => ["date", "time", "datetime-local"].includes(i.type))
    .map(i => i.name);
  const wide = document.documentElement.scrollWidth - document.documentElement.clientWidth;
  return {shown, svgText, cells, charts, dates, wide};
}"""


def look_at(page: Page) -> dict[str, Any]:
    """What the page shows, measured in the browser."""
    found: dict[str, Any] = page.evaluate(SEEN)
    return found


def check_page(seen: dict[str, Any], where: str) -> None:
    """Everything a reader would frown at, on any page."""
    text = seen["shown"] + "\n" + seen["svgText"]
    assert not OLD_DATE.search(text), f"{where}: a date before 2000: {OLD_DATE.search(text)}"
    assert not MICROSECONDS.search(text), f"{where}: a time with microseconds"
    assert not RAW_ISO.search(seen["shown"]), f"{where}: a raw ISO time: {RAW_ISO.search(text)}"
    assert not BARE_OFFSET.search(text), f"{where}: seconds where a date belongs"
    for cell in seen["cells"]:
        assert cell["lines"] <= 1, f"{where}: {cell['text']!r} wraps onto {cell['lines']} lines"
        assert cell["overflow"] <= 1, f"{where}: {cell['text']!r} overflows its cell"
    assert seen["dates"] == [], f"{where}: date fields in the browser's local time: {seen['dates']}"
    assert seen["wide"] <= 1, f"{where}: the page is {seen['wide']} px wider than the window"
    charts = seen["charts"]
    windows = {(c["start"], c["end"]) for c in charts}
    assert len(windows) <= 1, f"{where}: charts over different windows: {windows}"
    for chart in charts:
        start, end = (datetime.fromisoformat(chart[k]) for k in ("start", "end"))
        assert start.year >= 2000, f"{where}: {chart['label']} starts {start}"
        ticks = [datetime.fromisoformat(t) for t in chart["ticks"]]
        assert len(ticks) >= 2, f"{where}: {chart['label']} has no time axis"
        assert all(start <= t <= end for t in ticks), f"{where}: {chart['label']}: {ticks}"


def visit(lab: BusyLab, size: str, path: str, name: str) -> tuple[Page, dict[str, Any]]:
    """Open ``path`` at ``size``, keep its screenshot, check it; the page and what it shows."""
    page = lab.contexts[size].new_page()
    answer = page.goto(f"{lab.server.url}/ui{path}")
    assert answer is not None
    assert answer.status == 200, f"{path}: {answer.status}"
    page.wait_for_load_state("load")
    lab.shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(lab.shots / f"{name}-{size}.png"), full_page=True)
    seen = look_at(page)
    check_page(seen, f"{path} at {size}")
    return page, seen


PAGES = {
    "jobs": "/jobs",
    "runs": "/runs",
    "run": "/runs/nightly-42",
    "queue": "/queue",
    "systems": "/systems",
    "system": "/systems/s1.lab1",
    "labs": "/labs",
    "agents": "/agents",
    "usage": "/usage?last=24h",
    "charts": "/charts?last=6h",
    "submit": "/submit",
    "account": "/account",
    "whatif": "/whatif",
    "distros": "/distros",  # no lab carries a tree: one would turn the distro rule on for all
}


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("name", list(PAGES))
def test_each_page_reads_right(busy_lab: BusyLab, name: str, size: str) -> None:
    page, _ = visit(busy_lab, size, PAGES[name], name)
    page.close()


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("role", ["running", "retried", "failed"])
def test_each_kind_of_job_page_reads_right(busy_lab: BusyLab, role: str, size: str) -> None:
    page, _ = visit(busy_lab, size, f"/jobs/{busy_lab.jobs[role]}", f"job-{role}")
    page.close()


def test_the_charts_all_span_the_window_chosen_and_draw_lines(busy_lab: BusyLab) -> None:
    page, seen = visit(busy_lab, "wide", "/charts?last=6h", "charts")
    (start, end) = {(c["start"], c["end"]) for c in seen["charts"]}.pop()
    span = datetime.fromisoformat(end) - datetime.fromisoformat(start)
    assert span.total_seconds() == 6 * 3600
    assert len(seen["charts"]) == 5
    # every line chart with data draws a line of many points, not a few dots
    lines = page.eval_on_selector_all(
        "svg.labq-chart g.tip > path[d]",
        "ps => ps.map(p => (p.getAttribute('d').match(/L/g) || []).length)",
    )
    assert lines, "no line drawn"
    assert max(lines) >= 10
    page.close()


def test_the_whatif_page_shows_dates_durations_and_counts_that_agree(busy_lab: BusyLab) -> None:
    page, seen = visit(busy_lab, "wide", "/whatif", "whatif")
    text = seen["shown"]
    window = re.search(r"Window: (\S+ \S+) – (\S+ \S+) UTC", text)
    assert window is not None, text
    assert all(datetime.fromisoformat(w).year >= 2000 for w in window.groups())
    sets = page.locator("table.whatif-metrics tr", has_text="recipe sets (started)")
    current = sets.locator("td").nth(1).inner_text()  # "15 (13)": the current run's sets
    replayed = re.search(r"replayed (\d+) recipe sets?", text)
    assert replayed is not None, text
    assert current.split()[0] == replayed.group(1)
    parts = re.search(
        r"(\d+) had started in reality .* other (\d+) are (\d+) retr\w* and (\d+)", text
    )
    assert parts is not None, text
    started, other, retries, not_started = (int(g) for g in parts.groups())
    assert started + other == int(replayed.group(1))
    assert retries + not_started == other
    assert retries >= 1  # the retried job
    page.close()


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize(("name", "table"), [("queue", "queue"), ("jobs", "jobs")])
def test_why_a_set_waits_is_on_the_screen_at_both_sizes(
    busy_lab: BusyLab, size: str, name: str, table: str
) -> None:
    page, _ = visit(busy_lab, size, PAGES[name], name)
    width = SIZES[size][0]
    edges = page.eval_on_selector_all(
        f"table.{table} td.why, table.{table} tr.why-row td",
        """cells => cells.filter(c => c.offsetParent !== null && c.innerText.trim())
                       .map(c => {
                         const text = document.createRange();  // the words, not the cell
                         text.selectNodeContents(c);
                         return [c.innerText, text.getBoundingClientRect().right];
                       })""",
    )
    assert len(edges) >= 3  # a reason for each waiting set, shown once
    assert all(text.startswith("waits for") for text, _ in edges), edges
    assert all(right <= width for _, right in edges), edges
    page.close()
