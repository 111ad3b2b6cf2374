"""The page faults of issue 22, read in process: each test failed before its fix.

Uses the API tests' ``lab``: root (admin); alice and carol in kernel-qe; bob in
no group; a clock that stands still at ``T0``.
"""

from __future__ import annotations

import re
from datetime import timedelta

from labq.domain.states import RecipeState
from labq.store import reading, transaction
from labq.web.rendering import duration
from tests.api.conftest import T0, Lab, submit
from tests.ui.test_pages import UI, csrf_of, log_in

RAW_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")


def shown_text(html: str) -> str:
    """What a reader sees of the page's main part: no tags, no attribute values."""
    main = html.split("<main>", 1)[1].split("</main>", 1)[0]
    main = re.sub(r"<svg.*?</svg>", "", main, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", main))


def test_a_finished_sets_token_is_not_listed_as_valid(lab: Lab) -> None:
    job = submit(lab, "alice")
    with transaction(lab.engine) as repo:
        rset = repo.jobs.load_job(job).sets[0]
        token_id, _ = repo.tokens.create_token(
            "alice", "set", now=T0 - timedelta(hours=1), recipe_set=rset.id
        )
        repo.queue.cancel_job(job, actor="alice", now=T0)
    log_in(lab, "alice")
    page = lab.client.get(f"{UI}/account").text
    row = re.search(rf"<td>{token_id}</td>.*?</tr>", page, re.S)
    assert row is not None
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td>(.*?)</td>", row.group(0))]
    assert cells[1] == "set"
    assert cells[-1] == "ended with its set"
    assert cells[-2] == "2026-01-01 00:00:00"  # when it stopped working


def test_a_running_sets_token_says_until_when_it_is_valid(lab: Lab) -> None:
    job = submit(lab, "alice")
    with transaction(lab.engine) as repo:
        rset = repo.jobs.load_job(job).sets[0]
        token_id, _ = repo.tokens.create_token("alice", "set", now=T0, recipe_set=rset.id)
    log_in(lab, "alice")
    page = lab.client.get(f"{UI}/account").text
    row = re.search(rf"<td>{token_id}</td>.*?</tr>", page, re.S)
    assert row is not None
    assert f"when RS:{rset.id} ends" in row.group(0)
    assert row.group(0).rstrip().endswith("<td>valid</td>\n    </tr>")


def test_each_verb_of_a_system_has_a_box_of_its_own(lab: Lab) -> None:
    log_in(lab, "root")
    page = lab.client.get(f"{UI}/systems/s2.lab").text
    forms = re.findall(r'<form [^>]*class="action[^"]*">(.*?)</form>', page, re.S)
    headings = [re.search(r"<h3>(.*?)</h3>", f).group(1) for f in forms]  # type: ignore[union-attr]
    assert headings == ["Reserve", "Loan", "Remove from service"]
    assert [f.count("<button") for f in forms] == [1, 1, 1]


def test_no_page_asks_for_a_time_in_the_browsers_local_zone(lab: Lab) -> None:
    log_in(lab, "root")
    for path in ("/charts", "/usage", "/whatif", "/systems/s1.lab"):
        page = lab.client.get(f"{UI}{path}").text
        assert 'type="datetime-local"' not in page, path
        fields = re.findall(r"<label>([^<]*)<input[^>]*name=\"(start|end|since|until)\"", page)
        assert fields, path
        assert all("UTC" in label for label, _ in fields), (path, fields)
    # and what the field shows is read back as UTC
    shown = lab.client.get(f"{UI}/charts?start=2026-02-01 10:00&end=2026-02-01 16:00").text
    assert 'value="2026-02-01 10:00"' in shown
    assert "2026-02-01 10:00:00 – 2026-02-01 16:00:00 UTC" in shown


def test_the_charts_page_draws_every_chart_over_the_chosen_window(lab: Lab) -> None:
    submit(lab, "alice")
    log_in(lab, "bob")
    page = lab.client.get(f"{UI}/charts?start=2026-02-01 10:00&end=2026-02-01 16:00").text
    windows = re.findall(r'data-window-start="([^"]+)" data-window-end="([^"]+)"', page)
    assert len(windows) == 5
    assert set(windows) == {("2026-02-01T10:00:00+00:00", "2026-02-01T16:00:00+00:00")}
    assert "Mean wait (started and still waiting)" in page


def test_the_whatif_page_shows_dates_durations_and_counts_that_agree(lab: Lab) -> None:
    first = submit(lab, "alice")
    submit(lab, "alice")
    with transaction(lab.engine) as repo:  # the first started and ran; the second still waits
        rset = repo.jobs.load_job(first).sets[0]
        recipe = rset.recipes[0].id
        repo.moves.move_recipe(recipe, RecipeState.SCHEDULED, now=T0, system="s1.lab")
        assert repo.supervisors.start_recipe_set(
            rset.id, lab="lab1", now=T0 + timedelta(seconds=30)
        )
    log_in(lab, "root")
    since = (T0 - timedelta(days=1)).strftime("%Y-%m-%d %H:%M")
    until = (T0 + timedelta(hours=1)).strftime("%Y-%m-%d %H:%M")
    form = {"csrf": csrf_of(lab), "since": since, "until": until, "settings": "holds: {}"}
    answer = lab.client.post(f"{UI}/whatif/compare", data=form, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    page = lab.client.get(f"{UI}/whatif").text
    text = shown_text(page)
    assert f"Window: {since}:00 – {until}:00 UTC (1 d 1 h)" in text
    assert not RAW_ISO.search(text)
    assert not re.search(r"\d{4,}(\.\d+)? s\b", text)  # seconds since the window's start
    metrics = re.search(r"recipe sets \(started\) (\d+) \((\d+)\)", text)
    replayed = re.search(r"The current run replayed (\d+) recipe sets?", text)
    parts = re.search(
        r"(\d+) had started in reality .*? other (\d+) are (\d+) retr\w* and (\d+)", text
    )
    assert metrics is not None, text
    assert replayed is not None, text
    assert parts is not None, text
    assert replayed.group(1) == metrics.group(1) == "2"
    assert [int(p) for p in parts.groups()] == [1, 1, 0, 1]
    # the chart of waits is drawn over the window, in dates
    (start, end) = re.findall(r'data-window-start="([^"]+)" data-window-end="([^"]+)"', page)[0]
    assert start.startswith(f"{since.replace(' ', 'T')}:00")
    assert end.startswith(f"{until.replace(' ', 'T')}:00")
    with reading(lab.engine) as repo:
        assert repo.jobs.count_jobs() == 2


def test_a_duration_never_breaks_between_its_number_and_its_unit() -> None:
    # "29 s" in a narrow cell or a sentence wrapped into "29" and "s" (issue 22)
    assert duration(29) == "29\xa0s"
    assert duration(3725) == "1\xa0h 2\xa0min"
    assert " " not in duration(0)
