"""Slow clients cannot hold a real ``labq server`` (issue 10, item 9; issue 21).

Many connections trickle their requests; the server closes them after
``server.header_timeout``/``body_timeout``, keeps at most ``max_connections``
open (pushing out the longest waiting), serves a normal client all along, and
its descriptors stay bounded. A body is read only with a valid credential in the
head (401 at once without), credentialed bodies hold at most their share of the
connections (503 past it unless the body comes whole within a second), and a
body slower than ``body_min_rate`` is cut off. ``bench/slow_clients.py`` is the
long version (20,000 trickled heads; 1,200 and 3,000 trickled bodies).
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.acceptance.conftest import Running, labq_command, running_server

CAP = 100
BACKLOG = 64  # labq.serving.accept_backlog for this cap
TIMEOUT = 2.0
TRICKLERS = 1500
HEAD = b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n"  # never finished


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


BODY_TIMEOUT = 30.0  # long: what frees a connection here is a refusal or the rate, never this
SHARE = 0.5  # server.body_share: 50 credentialed bodies at once
PER_CREDENTIAL = 30


def _server(tmp_path: Path, **server: float) -> Iterator[Running]:
    config = tmp_path / "labq.yaml"
    config.write_text("server:\n" + "".join(f"  {k}: {v}\n" for k, v in server.items()))
    with running_server(
        f"sqlite:///{tmp_path / 'labq.db'}",
        data=tmp_path / "data",
        home=tmp_path,
        log=tmp_path / "server.log",
        config=config,
    ) as running:
        yield running


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[Running]:
    yield from _server(
        tmp_path,
        max_connections=CAP,
        header_timeout=TIMEOUT,
        body_timeout=BODY_TIMEOUT,
        body_min_rate=0,  # bodies are held by the share alone
        body_share=SHARE,
        bodies_per_credential=PER_CREDENTIAL,
    )


@pytest.fixture
def paced(tmp_path: Path) -> Iterator[Running]:
    yield from _server(
        tmp_path,
        max_connections=CAP,
        header_timeout=TIMEOUT,
        body_timeout=BODY_TIMEOUT,
        body_min_rate=200,
        body_grace=2,
    )


def _connect(url: str, first: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=10)
    sock.sendall(first)
    return sock


def _closed_by_server(sock: socket.socket, within: float) -> bytes | None:
    """What the server sent before closing (b"" for nothing); None if still open."""
    sock.settimeout(within)
    received = b""
    try:
        while chunk := sock.recv(4096):
            received += chunk
    except (TimeoutError, OSError):
        return None
    return received


@pytest.mark.alone  # how long the normal client waits is its point; it mostly waits
def test_trickling_clients_cannot_starve_a_normal_one(guarded: Running) -> None:
    # the server opens what it keeps (database connections, the fork server's socket) on
    # its first requests: count its descriptors once it has served one
    assert httpx.get(f"{guarded.url}/api/v1/health", timeout=10).status_code == 200
    time.sleep(0.5)
    idle = descriptors(guarded.pid)
    socks = [_connect(guarded.url, HEAD) for _ in range(TRICKLERS)]
    try:
        peak = descriptors(guarded.pid)
        started = time.monotonic()
        answer = httpx.get(f"{guarded.url}/api/v1/health", timeout=10)
        assert answer.status_code == 200
        assert time.monotonic() - started < 8  # served, not starved (loose: CI may be busy)
        for sock in socks[-20:]:
            sock.send(b"X")  # still trickling: the deadline counts from the start
            peak = max(peak, descriptors(guarded.pid))
        # bounded by the cap, not by the 1,500: a pushed-out socket is closed a turn or two
        # of asyncio's loop after the one that accepted its replacement, so under load a
        # second backlog may be open meanwhile (CI once: 200 over idle, cap 100, backlog 64)
        assert peak <= idle + CAP + 2 * BACKLOG + 30
        # closed after the header timeout: waited for, not slept through (a busy machine may
        # close them a little late)
        deadline = time.monotonic() + TIMEOUT + 10
        while descriptors(guarded.pid) > idle + 5:
            assert time.monotonic() < deadline, "the trickling connections were not closed"
            time.sleep(0.2)
        last = _closed_by_server(socks[-1], within=1)
        assert last is not None
        assert last.startswith(b"HTTP/1.1 408 ")
    finally:
        for sock in socks:
            sock.close()


def _body_head(path: str, auth: str | None = None, *, length: int = 100_000) -> bytes:
    """A request head with a long body to come, and the body's first byte."""
    lines = [f"POST {path} HTTP/1.1", "Host: x", "Content-Type: application/json"]
    if auth is not None:
        lines.append(f"Authorization: {auth}")
    return ("\r\n".join([*lines, f"Content-Length: {length}", "", ""]) + "{").encode()


def _answered(socks: list[socket.socket], count: int, within: float) -> list[bytes]:
    """The answers of ``count`` of ``socks`` (each up to its close), waited for together."""
    answers: dict[socket.socket, bytes] = {}
    deadline = time.monotonic() + within
    while len(answers) < count and time.monotonic() < deadline:
        pending = [sock for sock in socks if sock not in answers]
        ready, _, _ = select.select(pending, [], [], 0.5)
        for sock in ready:
            answers[sock] = _closed_by_server(sock, within=5) or b""
    return list(answers.values())


def _still_served(server: Running) -> None:
    """Health, an authenticated list (over HTTP and by ``labq job list``) and an
    authenticated POST whose body comes at once are all answered."""
    auth = {"Authorization": f"Bearer {server.token}"}
    assert httpx.get(f"{server.url}/api/v1/health", timeout=10).status_code == 200
    assert httpx.get(f"{server.url}/api/v1/jobs", headers=auth, timeout=10).status_code == 200
    listed = subprocess.run(
        [*labq_command(), "job", "list"],
        env={**server.env, "LABQ_URL": server.url, "LABQ_TOKEN": server.token},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    made = httpx.post(
        f"{server.url}/api/v1/labs", json={"name": f"lab{time.monotonic_ns()}"}, headers=auth
    )
    assert made.status_code == 201, made.text


@pytest.mark.parametrize("auth", [None, "Bearer lq_not-a-token", "Basic eDp5"])
def test_a_body_without_a_valid_credential_is_refused_before_it_is_read(
    guarded: Running, auth: str | None
) -> None:
    # twice the cap, half a cap at a time (a burst past the cap would push out connections
    # whose head the server has not read yet): held until their bodies came, the first
    # two batches would fill the cap and shut everyone else out
    socks: list[socket.socket] = []
    try:
        for _ in range(4):
            batch = [
                _connect(guarded.url, _body_head("/api/v1/labs", auth)) for _ in range(CAP // 2)
            ]
            socks += batch
            answers = _answered(batch, len(batch), within=BODY_TIMEOUT / 2)
            assert len(answers) == len(batch)
            assert [a for a in answers if not a.startswith(b"HTTP/1.1 401 ")] == []
            assert b"www-authenticate: Bearer" in answers[0]
        _still_served(guarded)
    finally:
        for sock in socks:
            sock.close()


def test_credentialed_bodies_hold_at_most_their_share(guarded: Running) -> None:
    auth = {"Authorization": f"Bearer {guarded.token}"}
    second = httpx.post(
        f"{guarded.url}/api/v1/tokens", json={"name": "second"}, headers=auth, timeout=10
    ).json()["secret"]
    share = int(CAP * SHARE)
    socks: list[socket.socket] = []
    try:
        # 40 of each token: the first gets PER_CREDENTIAL in, the second what is left of
        # the share; every other one 503 after a second, its body unread
        for token in (guarded.token, second):
            for _ in range(40):
                socks.append(_connect(guarded.url, _body_head("/api/v1/labs", f"Bearer {token}")))
        refused = _answered(socks, len(socks) - share, within=BODY_TIMEOUT / 2)
        assert len(refused) == len(socks) - share
        assert all(answer.startswith(b"HTTP/1.1 503 ") for answer in refused)
        assert b"too many requests sending bodies" in refused[0]
        # the rest of the cap is for everyone else, even with trickled heads filling it
        heads = [_connect(guarded.url, HEAD) for _ in range(CAP)]
        socks += heads
        _still_served(guarded)
        admitted = [sock for sock in socks[:80] if _closed_by_server(sock, within=0.1) is None]
        assert len(admitted) == share  # still open, bodies still awaited
    finally:
        for sock in socks:
            sock.close()


def test_a_body_slower_than_the_minimum_rate_is_cut_off(paced: Running) -> None:
    sock = _connect(paced.url, _body_head("/api/v1/labs", f"Bearer {paced.token}"))
    try:
        started = time.monotonic()
        while _closed_by_server(sock, within=0.5) is None:  # 2 bytes/s, the floor is 200
            assert time.monotonic() - started < BODY_TIMEOUT - 5, "the slow body was not cut off"
            try:
                sock.send(b" ")
            except (BrokenPipeError, ConnectionResetError):
                break  # cut off between the look and the byte: what this test waits for
        _still_served(paced)
    finally:
        sock.close()


def test_the_login_form_takes_a_body_without_a_credential_tightly_bound(
    guarded: Running,
) -> None:
    form = b"nonce=x&user=admin&password=wrong"
    login = httpx.post(
        f"{guarded.url}/ui/login",
        content=form,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        timeout=10,
    )
    assert login.status_code == 401  # the form itself answers: an expired form
    assert "Log in" in login.text
    other = httpx.post(f"{guarded.url}/ui/submit", content=form, timeout=10)
    assert other.status_code == 303  # any other page's form: to the login page first
    assert other.headers["location"] == "/ui/login"
    trickled = _connect(guarded.url, _body_head("/ui/login", length=len(form)))
    try:
        started = time.monotonic()
        assert _closed_by_server(trickled, within=BODY_TIMEOUT - 5) is not None
        assert time.monotonic() - started < BODY_TIMEOUT - 5  # a head's time, not a body's
    finally:
        trickled.close()
