"""The pages in Chromium against a real ``labq server``: log in, submit, watch, read logs, cancel.

Each test takes screenshots of the pages it visits into ``test-output/screenshots``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.ui.conftest import SYSTEMS, UiServer, job_id_of, log_in, screenshot

PageMaker = Callable[..., Page]
RUNNING = {"scheduled", "waiting", "installing", "running"}

WATCHED_JOB = """\
whiteboard: watched from the browser
recipe_sets:
  - max_time: 120
    recipes:
      - host: {memory_mb: {">=": 4096}}
        tasks:
          - {name: hello, run: 'echo "hello from $LABQ_FQDN"', timeout: 30}
          - {name: nap, run: sleep 3, timeout: 30}
"""
QUICK_JOB = """\
whiteboard: quick, in a run
recipe_sets:
  - recipes:
      - host: {memory_mb: {">=": 4096}}
        tasks:
          - {name: hello, run: 'echo hi', timeout: 30}
"""
LONG_JOB = """\
whiteboard: {name}
recipe_sets:
  - max_time: 1200
    recipes:
      - host: {{memory_mb: {{">=": 4096}}}}
        tasks:
          - {{name: long, run: sleep 600, timeout: 900}}
"""


def long_job(name: str) -> str:
    """A job that runs for ten minutes unless it is cancelled."""
    return LONG_JOB.format(name=name)


def test_pages_need_a_login_and_a_bad_token_is_refused(
    ui_server: UiServer, new_page: PageMaker
) -> None:
    page = new_page()
    page.goto(f"{ui_server.url}/")
    expect(page).to_have_url(re.compile(r"/ui/login\?next="))
    screenshot(page, "login")
    page.get_by_label("Token").fill("lq_not-a-token")
    page.get_by_role("button", name="Log in").click()
    expect(page.locator(".error")).to_contain_text("unknown, expired or revoked")
    assert "lq_not-a-token" not in page.content()  # a secret is never echoed back


def test_a_job_submitted_from_a_file_runs_to_completion_live(
    ui_server: UiServer, new_page: PageMaker, tmp_path: Path
) -> None:
    page = new_page()
    log_in(page, ui_server, ui_server.admin_token)
    page.get_by_role("link", name="Submit").click()
    screenshot(page, "submit")
    job_file = tmp_path / "watched.yaml"
    job_file.write_text(WATCHED_JOB)
    page.get_by_label("Job file").set_input_files(str(job_file))
    page.get_by_role("button", name="Submit").click()
    expect(page).to_have_url(re.compile(r"/ui/jobs/\d+\?note=submitted"))
    expect(page.locator(".note")).to_contain_text("submitted")
    job_id = job_id_of(page)
    # a mark on this document: if the page reloaded, it would be gone
    page.evaluate("window.labqSameDocument = true")
    summary = page.locator(".summary")
    expect(summary).to_contain_text("completed", timeout=60_000)
    expect(summary.locator(".result")).to_have_text("pass")
    assert page.evaluate("window.labqSameDocument") is True
    live = page.locator(".live")
    expect(live).to_have_attribute("data-live-updated", re.compile(r"\d+"))
    expect(live).to_have_attribute("data-live-stopped", "finished")
    expect(page.get_by_role("button", name="Cancel job")).to_be_hidden()  # nothing to cancel
    expect(page.locator(".history").first).to_contain_text("running")
    screenshot(page, "job")

    hello = page.locator("ul.logs a", has_text="hello").first
    hello.click()
    expect(page.locator("body")).to_contain_text("hello from s")
    screenshot(page, "log")
    assert ui_server.state(job_id) == "completed"


def test_a_long_running_job_is_cancelled(ui_server: UiServer, new_page: PageMaker) -> None:
    job_id = ui_server.submit(long_job("to be cancelled"))
    try:
        ui_server.wait_for_state(job_id, {"running"})
        page = new_page()
        log_in(page, ui_server, ui_server.admin_token)
        page.goto(f"{ui_server.url}/ui/jobs/{job_id}")
        expect(page.locator(".summary")).to_contain_text("running")
        page.get_by_label("Reason").fill("wrong kernel")
        page.get_by_role("button", name="Cancel job").click()
        expect(page.locator(".note")).to_contain_text("cancelled")
        expect(page.locator(".summary")).to_contain_text("cancelled")
        expect(page.locator(".history").first).to_contain_text("wrong kernel")
        expect(page.get_by_role("button", name="Cancel job")).to_have_count(0)
        screenshot(page, "job-cancelled")
        assert ui_server.state(job_id) == "cancelled"
    finally:
        ui_server.cancel(job_id)


def test_a_user_without_rights_is_not_offered_the_cancel_and_is_refused(
    ui_server: UiServer, new_page: PageMaker
) -> None:
    admins = ui_server.submit(long_job("the admin's"))
    bobs = ui_server.submit(long_job("bob's"), token=ui_server.bob_token)
    try:
        page = new_page()
        log_in(page, ui_server, ui_server.bob_token)
        page.goto(f"{ui_server.url}/ui/jobs/{admins}")
        expect(page.locator("h1")).to_contain_text(f"J:{admins}")
        expect(page.get_by_role("button", name="Cancel job")).to_have_count(0)
        expect(page.locator("#priority-form")).to_have_count(0)
        screenshot(page, "job-of-someone-else")
        # His own job offers the form; sent for the admin's job (a stale or forged
        # form), it is refused with the API's words, and nothing is cancelled.
        page.goto(f"{ui_server.url}/ui/jobs/{bobs}")
        form = page.locator("#cancel-form")
        form.evaluate(f"(f) => f.setAttribute('action', '/ui/jobs/{admins}/cancel')")
        page.get_by_role("button", name="Cancel job").click()
        refusal = page.locator(".error")
        expect(refusal).to_contain_text(f"job {admins} belongs to 'admin'")
        expect(refusal).to_contain_text("'bob' may not change it")
        screenshot(page, "cancel-refused")
        assert ui_server.state(admins) not in {"cancelled", "completed", "aborted"}
        # bob may lower his own job's priority but not raise it: only lower ones are offered
        page.goto(f"{ui_server.url}/ui/jobs/{bobs}")
        if page.locator("#priority-form").count():
            offered = page.locator("#priority-form option").all_inner_texts()
            assert "urgent" not in offered
    finally:
        ui_server.cancel(admins)
        ui_server.cancel(bobs)


def test_the_queue_page_updates_itself(ui_server: UiServer, new_page: PageMaker) -> None:
    busy = [ui_server.submit(long_job(f"filler {n}")) for n in range(len(SYSTEMS))]
    queued: list[int] = []
    try:
        for job_id in busy:
            ui_server.wait_for_state(job_id, RUNNING)
        queued.append(ui_server.submit(long_job("queued first")))
        page = new_page()
        log_in(page, ui_server, ui_server.admin_token)
        page.get_by_role("link", name="Queue").click()
        rows = page.locator("table.queue tbody tr")
        expect(rows.filter(has_text=f"J:{queued[0]}")).to_have_count(1)
        page.evaluate("window.labqSameDocument = true")
        queued.append(ui_server.submit(long_job("queued second")))
        expect(rows.filter(has_text=f"J:{queued[1]}")).to_have_count(1, timeout=15_000)
        assert page.evaluate("window.labqSameDocument") is True
        expect(rows.first).to_contain_text("normal")
        # each waiting set's forecast: when it starts and ends, on what grounds
        first = rows.filter(has_text=f"J:{queued[0]}").first
        expect(first.locator("td.forecast")).to_contain_text(re.compile(r"starts ~\d\d:\d\d UTC"))
        # on what grounds: the declared time, or (when an earlier test of the module ran a job
        # of the same owner to its end) what those runs took
        grounds = re.compile(r"from max_time 20 min|earlier runs? of its owner's jobs, median")
        expect(first.locator("td.forecast")).to_contain_text(grounds)
        screenshot(page, "queue")
        page.goto(f"{ui_server.url}/ui/jobs/{queued[0]}")
        expect(page.locator("p.forecast")).to_contain_text("Forecast: starts ~")
    finally:
        for job_id in busy + queued:
            ui_server.cancel(job_id)


def test_every_page_reads_without_javascript(ui_server: UiServer, new_page: PageMaker) -> None:
    job_id = ui_server.submit(WATCHED_JOB)
    ui_server.wait_for_state(job_id, {"completed"}, timeout=60)
    page = new_page(js=False)
    log_in(page, ui_server, ui_server.admin_token)
    expect(page.locator("table.jobs")).to_contain_text(f"J:{job_id}")
    screenshot(page, "jobs")

    page.goto(f"{ui_server.url}/ui/jobs?state=completed&owner=admin")
    states = page.locator("table.jobs tbody tr td:nth-child(5)").all_inner_texts()
    assert states
    assert set(states) == {"completed"}

    page.goto(f"{ui_server.url}/ui/jobs/{job_id}")
    expect(page.locator(".summary")).to_contain_text("completed")
    expect(page.locator("noscript")).to_have_count(1)
    expect(page.locator(".tasks").first).to_contain_text("nap")
    screenshot(page, "job-nojs")

    page.goto(f"{ui_server.url}/ui/systems")
    expect(page.locator("table")).to_contain_text("s1.lab1")
    screenshot(page, "systems")

    page.get_by_role("link", name="s1.lab1").first.click()
    expect(page.locator(".big")).to_contain_text("Utilisation")
    expect(page.locator("figure.chart svg")).to_have_count(1)
    screenshot(page, "system")

    page.get_by_role("link", name="Labs & pools").click()
    expect(page.locator("body")).to_contain_text("kernel-qe")
    screenshot(page, "labs")

    page.get_by_role("link", name="Charts").click()
    expect(page.locator("figure.chart svg")).to_have_count(5)
    screenshot(page, "charts")

    page.get_by_role("link", name="Queue").click()
    expect(page.locator("h1")).to_have_text("Queue")

    page.goto(f"{ui_server.url}/ui/jobs/999999")
    expect(page.locator(".error")).to_contain_text("no job 999999")
    screenshot(page, "not-found")


def test_a_password_set_on_the_account_page_logs_in(
    ui_server: UiServer, new_page: PageMaker
) -> None:
    page = new_page()
    log_in(page, ui_server, ui_server.bob_token)
    page.locator(".who").get_by_role("link", name="bob").click()
    page.get_by_label("New password").fill("correct horse battery")
    page.get_by_label("Again").fill("correct horse battery")
    page.get_by_role("button", name="Set password").click()
    expect(page.locator(".note")).to_contain_text("password is set")
    screenshot(page, "account")
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/ui/login"))
    page.goto(f"{ui_server.url}/ui/jobs")
    expect(page).to_have_url(re.compile(r"/ui/login\?next="))  # the session was ended
    page.get_by_label("User").fill("bob")
    page.get_by_label("Password").fill("correct horse battery")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(r"/ui/jobs$"))
    expect(page.locator(".who")).to_contain_text("bob")


def test_a_run_page_counts_its_jobs_and_cancels_them(
    ui_server: UiServer, new_page: PageMaker
) -> None:
    jobs = [
        {"name": "quick.yaml", "document": QUICK_JOB},
        {"name": "long.yaml", "document": long_job("in a run")},
    ]
    made = ui_server.api.post("/runs", json={"name": "browser-run", "jobs": jobs})
    assert made.status_code == 201, made.text
    quick, long = made.json()["jobs"]
    try:
        ui_server.wait_for_state(quick, {"completed"})
        ui_server.wait_for_state(long, {"running"})
        page = new_page()
        log_in(page, ui_server, ui_server.admin_token)
        page.goto(f"{ui_server.url}/ui/runs")
        page.get_by_role("link", name="browser-run").click()
        counts = page.locator(".run-counts")
        expect(counts.locator('[data-count="pass"]')).to_have_text("1")
        expect(counts.locator('[data-count="running"]')).to_have_text("1")
        expect(page.get_by_role("link", name=f"J:{long}")).to_be_visible()
        screenshot(page, "run")
        page.get_by_label("Reason").fill("enough")
        page.get_by_role("button", name="Cancel run").click()
        expect(page.locator(".note")).to_contain_text("cancelled")
        ui_server.wait_for_state(long, {"cancelled"})
        page.reload()
        expect(counts.locator('[data-count="dead"]')).to_have_text("1")
        expect(counts.locator('[data-count="pass"]')).to_have_text("1")
        screenshot(page, "run-cancelled")
    finally:
        ui_server.cancel(long)
