"""Slow clients cannot hold a real ``labq server`` (issue 10, item 9).

Many connections trickle their requests; the server closes them after
``server.header_timeout``/``body_timeout``, keeps at most ``max_connections``
open (pushing out the longest waiting), serves a normal client all along, and
its descriptors stay bounded. ``bench/slow_clients.py`` is the long version
(20,000 connections).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.acceptance.conftest import Running, running_server

CAP = 100
BACKLOG = 64  # labq.serving.accept_backlog for this cap
TIMEOUT = 2.0
TRICKLERS = 1500
HEAD = b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n"  # never finished


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[Running]:
    config = tmp_path / "labq.yaml"
    config.write_text(
        f"server:\n  max_connections: {CAP}\n"
        f"  header_timeout: {TIMEOUT}\n  body_timeout: {TIMEOUT}\n"
    )
    with running_server(
        f"sqlite:///{tmp_path / 'labq.db'}",
        data=tmp_path / "data",
        home=tmp_path,
        log=tmp_path / "server.log",
        config=config,
    ) as running:
        yield running


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
        assert peak <= idle + CAP + BACKLOG + 30  # bounded by the cap, not by the 1,500
        time.sleep(TIMEOUT + 1)
        deadline = time.monotonic() + 10  # a busy machine may close them a little late
        while descriptors(guarded.pid) > idle + 5:
            assert time.monotonic() < deadline, "the trickling connections were not closed"
            time.sleep(0.2)
        last = _closed_by_server(socks[-1], within=1)
        assert last is not None
        assert last.startswith(b"HTTP/1.1 408 ")
    finally:
        for sock in socks:
            sock.close()


def test_a_trickled_body_is_cut_off_and_busy_connections_are_capped(guarded: Running) -> None:
    head = b"POST /api/v1/labs HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"
    busy = [_connect(guarded.url, head) for _ in range(CAP)]
    try:
        time.sleep(0.5)  # every one has its head read: busy with a request, not evictable
        late = _connect(guarded.url, b"")
        busy.append(late)
        refused = _closed_by_server(late, within=2)
        assert refused is not None
        assert refused.startswith(b"HTTP/1.1 503 ")
        assert b"too many connections" in refused
        assert _closed_by_server(busy[0], within=TIMEOUT + 2) is not None  # the body deadline
        assert httpx.get(f"{guarded.url}/api/v1/health", timeout=10).status_code == 200
    finally:
        for sock in busy:
            sock.close()
