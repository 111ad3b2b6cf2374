"""The web UI in a real browser: Debian's Chromium driven by Playwright against ``labq server``.

(``test_pages.py`` reads the pages in process instead, through the API tests' ``lab``.)
One server (SQLite, local backend) serves the whole module; one browser too.
Every test gets fresh browser contexts, so no session leaks from one to the
next. Without ``/usr/bin/chromium`` the tests skip, but under ``CI=true`` they
fail: CI must run them (``.ci/run`` installs Chromium).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from tests.acceptance.conftest import running_server
from tests.api.conftest import lab, template  # noqa: F401 - fixtures of the in-process page tests

ROOT = Path(__file__).parents[2]
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = ROOT / "test-output" / "screenshots"
SYSTEMS = ("s1.lab1", "s2.lab1", "s3.lab1")
TIMEOUT_MS = 20_000


@dataclass
class UiServer:
    """A running ``labq server``, its admin's token, a second user's token, and an API client."""

    url: str
    admin_token: str
    bob_token: str
    api: httpx.Client
    data: Path

    def submit(self, document: str, *, token: str | None = None) -> int:
        """Submit a native job through the API; its id."""
        headers = {"Content-Type": "application/yaml"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        answer = self.api.post("/jobs", content=document, headers=headers)
        assert answer.status_code == 201, answer.text
        return int(answer.json()["id"])

    def state(self, job_id: int) -> str:
        """The job's derived state, as the API says."""
        return str(self.api.get(f"/jobs/{job_id}").json()["state"])

    def wait_for_state(self, job_id: int, wanted: set[str], timeout: float = 30) -> None:
        """Poll the API until the job is in one of ``wanted``."""
        deadline = time.monotonic() + timeout
        while (state := self.state(job_id)) not in wanted:
            assert time.monotonic() < deadline, f"job {job_id} is still {state}"
            time.sleep(0.2)

    def cancel(self, job_id: int) -> None:
        """Cancel a job through the API (the admin may cancel any)."""
        self.api.post(f"/jobs/{job_id}/cancel", json={"reason": "test over"})


def _fail_or_skip(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} (CI=true: the browser tests must run)")
    pytest.skip(message)


def _populate(api: httpx.Client) -> str:
    """A lab of local systems, an open and a restricted pool, and a user ``bob``; his token."""
    steps: list[tuple[str, str, dict[str, object]]] = [
        ("POST", "/labs", {"name": "lab1"}),
        ("POST", "/pools", {"name": "perf"}),
        ("POST", "/pools", {"name": "secure"}),
        ("POST", "/groups", {"name": "kernel-qe"}),
        ("PUT", "/pools/secure/rules/kernel-qe", {"max_priority": "high"}),
        ("POST", "/users", {"name": "bob"}),
    ]
    steps += [
        (
            "POST",
            "/systems",
            {"fqdn": fqdn, "lab": "lab1", "attributes": {"memory_mb": 8192}, "pools": ["perf"]},
        )
        for fqdn in SYSTEMS
    ]
    steps.append(("POST", "/systems", {"fqdn": "vault.lab1", "lab": "lab1", "pools": ["secure"]}))
    for method, path, body in steps:
        answer = api.request(method, path, json=body)
        assert answer.status_code in (200, 201), f"{method} {path}: {answer.text}"
    made = api.post("/tokens", json={"name": "ui-test", "user": "bob"})
    assert made.status_code == 201, made.text
    return str(made.json()["secret"])


@pytest.fixture(scope="session")
def chromium() -> Path:
    """Debian's Chromium; the tests skip without it (fail under CI=true)."""
    if not CHROMIUM.exists():
        _fail_or_skip(f"{CHROMIUM} is missing: apt-get install chromium")
    return CHROMIUM


@pytest.fixture(scope="package")
def browser(chromium: Path) -> Iterator[Browser]:
    """One headless Chromium for the page tests (one worker runs them all: tests/conftest.py).
    Not the session's: while it is up, the sync Playwright API keeps an event loop running
    in this thread, and a later test's asyncio.run would fail."""
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(chromium), args=["--no-sandbox"], headless=True
        )
        yield launched
        launched.close()


@pytest.fixture(scope="session")
def ui_server(tmp_path_factory: pytest.TempPathFactory, chromium: Path) -> Iterator[UiServer]:
    """``labq init`` then ``labq server`` on SQLite with the local backend; a lab to use."""
    home = tmp_path_factory.mktemp("ui-server")
    with running_server(
        f"sqlite:///{home / 'server.db'}",
        data=home / "data",
        home=home / "home",
        log=home / "server.log",
    ) as running:
        api = httpx.Client(
            base_url=f"{running.url}/api/v1",
            headers={"Authorization": f"Bearer {running.token}"},
            timeout=10,
        )
        try:
            bob_token = _populate(api)
            yield UiServer(running.url, running.token, bob_token, api, home / "data")
        finally:
            api.close()
    server_log = running.log.read_text()
    assert "Traceback" not in server_log, server_log
    for secret in (running.token, bob_token):
        assert secret not in server_log, "a token was written to the server's log"


@pytest.fixture
def new_page(browser: Browser) -> Iterator[Callable[..., Page]]:
    """Pages in fresh contexts (JavaScript on unless ``js=False``), closed after the test."""
    contexts: list[BrowserContext] = []

    def make(*, js: bool = True) -> Page:
        context = browser.new_context(
            java_script_enabled=js, viewport={"width": 1280, "height": 900}
        )
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


def screenshot(page: Page, name: str) -> Path:
    """Save the whole page as ``test-output/screenshots/<name>.png``."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def log_in(page: Page, server: UiServer, token: str) -> None:
    """Log in through the login form with an API token; lands on the jobs list."""
    page.goto(f"{server.url}/ui/login")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(r"/ui/jobs$"))


def job_id_of(page: Page) -> int:
    """The id of the job whose page is open."""
    found = re.search(r"/ui/jobs/(\d+)", page.url)
    assert found is not None, page.url
    return int(found.group(1))
