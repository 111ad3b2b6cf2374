"""A real ``labq server`` under trickling connections: served, and its descriptors bounded.

    .venv/bin/python bench/slow_clients.py [--connections 20000] [--seconds 40]
    .venv/bin/python bench/slow_clients.py --bodies 1200,3000 [--seconds 40]

Starts ``labq init`` and ``labq server`` (SQLite, default settings: at most 1000
connections, a request head within 10 s, a body within 60 s and at 500 bytes/s
after 5 s) in a temporary directory.

Heads (the default): measures a normal client first (sequential ``GET
/api/v1/health``), then again while worker processes keep ``--connections``
sockets open on the server, each sending a request head one byte per second and
reconnecting whenever the server closes it. Prints the normal client's median
and p99 latency under attack as a ratio to the baseline of the same run, its
failures, how many connections the attack had open, and the most descriptors
the server held (from /proc).

Bodies (``--bodies``): for each count, the attack sends ``POST /api/v1/jobs``
heads at once and then trickles their bodies a byte a second, reconnecting
whenever the server closes one — once without a token and once with the admin's
valid token. Once a second a prober tries ``GET /api/v1/health`` and an
authenticated ``GET /api/v1/jobs`` (what ``labq job list`` asks), each on a fresh
connection with a 1 s timeout, as the issue did; every fifth second it also
runs ``labq job list``. Prints, per attack, how many tries were answered within
1 s and the latencies as ratios to the same probes before any attack.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from labq.config import Server
from labq.serving import ConnectionLimits, accept_backlog

PER_WORKER = 9_000  # below the usual 10,000-descriptor soft limit once raised
HEAD = b"GET /api/v1/health HTTP/1.1\r\nHost: bench\r\nUser-Agent: trickle\r\n"
TRY_WITHIN = 1.0  # seconds a probe may take to count as answered


def body_head(token: str | None) -> bytes:
    """A job submission's head with a 1 MB body to come (optionally with a token)."""
    lines = [
        "POST /api/v1/jobs HTTP/1.1",
        "Host: bench",
        "User-Agent: trickle",
        "Content-Type: application/json",
        "Content-Length: 1000000",
    ]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def trickle(
    port: int, count: int, seconds: float, opened: Any, slot: int, first: bytes = b""
) -> None:
    """Keep ``count`` connections trickling a request for ``seconds``; reopen closed ones.

    Each sends ``first`` at once (nothing: a head is trickled from its start), then a
    byte a second."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 256), hard))
    selector = selectors.DefaultSelector()
    sent: dict[socket.socket, int] = {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        while len(sent) < count and time.monotonic() < deadline:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            except OSError:
                break
            if first:
                try:
                    sock.sendall(first)
                except OSError:
                    sock.close()
                    continue
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
            sent[sock] = 0
        opened[slot] = max(opened[slot], len(sent))
        for key, _ in selector.select(timeout=0):  # readable: the server answered or closed
            _drop(selector, sent, key.fileobj)  # type: ignore[arg-type]
        for sock in list(sent):
            try:
                sock.send(b" " if first else HEAD[sent[sock] : sent[sock] + 1] or b"X")
                sent[sock] += 1
            except OSError:
                _drop(selector, sent, sock)
        time.sleep(1.0)
    for sock in list(sent):
        _drop(selector, sent, sock)


def _drop(
    selector: selectors.BaseSelector, sent: dict[socket.socket, int], sock: socket.socket
) -> None:
    selector.unregister(sock)
    sent.pop(sock, None)
    sock.close()


def normal_client(url: str, requests: int) -> tuple[list[float], int]:
    """Latencies (s) of sequential health checks on fresh connections, and the failures."""
    times, failures = [], 0
    for _ in range(requests):
        started = time.perf_counter()
        try:
            ok = httpx.get(f"{url}/api/v1/health", timeout=15).status_code == 200
        except httpx.HTTPError:
            ok = False
        times.append(time.perf_counter() - started)
        failures += not ok
    return times, failures


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


@dataclass
class Served:
    """The server under attack: where it is, its pid, the admin's token, its environment."""

    url: str
    port: int
    pid: int
    token: str
    env: dict[str, str]


@contextmanager
def served(labq: str) -> Iterator[Served]:
    """``labq init`` and ``labq server`` in a temporary directory, default settings."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LABQ_")}
        env.update(LABQ_DB=f"sqlite:///{tmp}/labq.db", LABQ_DATA_DIR=f"{tmp}/data", HOME=tmp)
        init = subprocess.run([labq, "init"], env=env, check=True, capture_output=True, text=True)
        token = init.stdout.strip().splitlines()[-1]
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        log = open(f"{tmp}/server.log", "w")  # noqa: SIM115 - closed with the server
        server = subprocess.Popen(
            [labq, "server", "--port", str(port)], env=env, stdout=log, stderr=log
        )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_up(url)
            yield Served(
                url, port, server.pid, token, {**env, "LABQ_URL": url, "LABQ_TOKEN": token}
            )
        finally:
            server.terminate()
            server.wait(timeout=30)
            log.close()


def attack(
    server: Served, connections: int, seconds: float, first: bytes = b""
) -> tuple[list[multiprocessing.Process], Any]:
    """Worker processes trickling ``connections`` requests; the array of their peaks."""
    counts = [min(PER_WORKER, left) for left in range(connections, 0, -PER_WORKER)]
    opened = multiprocessing.Array("i", len(counts))
    workers = [
        multiprocessing.Process(target=trickle, args=(server.port, n, seconds, opened, i, first))
        for i, n in enumerate(counts)
    ]
    for worker in workers:
        worker.start()
    return workers, opened


def heads(server: Served, connections: int, seconds: float) -> None:
    """The normal client before and during ``connections`` trickled heads."""
    idle = descriptors(server.pid)
    base, base_failures = normal_client(server.url, 200)
    workers, opened = attack(server, connections, seconds)
    peak, attacked, failures = idle, [], 0
    ends = time.monotonic() + seconds - 5
    time.sleep(10)  # the attack opens its connections
    while time.monotonic() < ends:
        peak = max(peak, descriptors(server.pid))
        batch, failed = normal_client(server.url, 10)
        attacked += batch
        failures += failed
        peak = max(peak, descriptors(server.pid))
    for worker in workers:
        worker.join()
    limits = ConnectionLimits(10.0, 60.0, Server().max_connections)
    ms = 1000
    print(f"attack: {connections} trickling connections wanted, {sum(opened)} open at most")
    print(
        f"baseline: median {statistics.median(base) * ms:.1f} ms,"
        f" p99 {p99(base) * ms:.1f} ms, {base_failures} failed of {len(base)}"
    )
    print(
        f"under attack: median {statistics.median(attacked) * ms:.1f} ms"
        f" (x{statistics.median(attacked) / statistics.median(base):.2f}),"
        f" p99 {p99(attacked) * ms:.1f} ms (x{p99(attacked) / p99(base):.2f}),"
        f" {failures} failed of {len(attacked)}"
    )
    print(
        f"server descriptors: {idle} idle, {peak} at most (cap {limits.max_connections}"
        f" connections + listen backlog {accept_backlog(limits)})"
    )


@dataclass
class Probes:
    """Once-a-second tries of health and an authenticated list, and ``labq job list`` runs."""

    health: list[float | None] = field(default_factory=list)  # None: failed or over 1 s
    jobs: list[float | None] = field(default_factory=list)
    cli: list[float | None] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)  # why tries failed

    def summary(self, base: Probes | None) -> str:
        parts = []
        for name in ("health", "jobs", "cli"):
            tries: list[float | None] = getattr(self, name)
            answered = [t for t in tries if t is not None]
            within = "answered" if name == "cli" else f"within {TRY_WITHIN:g} s"
            part = f"{name}: {len(answered)}/{len(tries)} {within}"
            if answered:
                part += f", median {statistics.median(answered) * 1000:.0f} ms"
                if base is not None:
                    reference = [t for t in getattr(base, name) if t is not None]
                    ratio = statistics.median(answered) / statistics.median(reference)
                    part += f" (x{ratio:.2f})"
                part += f", max {max(answered) * 1000:.0f} ms"
            parts.append(part)
        if self.failures:
            parts.append("failures: " + ", ".join(f"{n} {why}" for why, n in self.failures.items()))
        return "; ".join(parts)


def probe(server: Served, seconds: float, labq: str) -> Probes:
    """Probe for ``seconds``: every second health and the job list over HTTP, every fifth
    ``labq job list`` (timed from the command's start: its own start-up included)."""
    found = Probes()
    auth = {"Authorization": f"Bearer {server.token}"}
    ends = time.monotonic() + seconds
    tick = 0
    while time.monotonic() < ends:
        started = time.monotonic()
        found.health.append(_timed_get(f"{server.url}/api/v1/health", {}, found.failures))
        found.jobs.append(_timed_get(f"{server.url}/api/v1/jobs", auth, found.failures))
        if tick % 5 == 0:
            began = time.perf_counter()
            listed = subprocess.run(
                [labq, "job", "list"], env=server.env, capture_output=True, timeout=60, check=False
            )
            took = time.perf_counter() - began
            found.cli.append(took if listed.returncode == 0 else None)
        tick += 1
        time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
    return found


def _timed_get(url: str, headers: dict[str, str], failures: Counter[str]) -> float | None:
    """The seconds a GET took, None (and why, in ``failures``) unless 200 within 1 s."""
    started = time.perf_counter()
    try:
        status = httpx.get(url, headers=headers, timeout=TRY_WITHIN).status_code
    except httpx.HTTPError as exc:
        failures[type(exc).__name__] += 1
        return None
    took = time.perf_counter() - started
    if status != 200 or took > TRY_WITHIN:
        failures[str(status) if status != 200 else "slow"] += 1
        return None
    return took


def bodies(server: Served, counts: list[int], seconds: float, labq: str) -> None:
    """The probes before any attack, then during each flood of trickled bodies."""
    base = probe(server, 20, labq)
    # The CLI's own start-up is most of its time: its 1 s is counted over its baseline.
    print(f"reference (no attack): {base.summary(None)}")
    for count in counts:
        for token in (None, server.token):
            idle = descriptors(server.pid)
            workers, opened = attack(server, count, seconds, body_head(token))
            time.sleep(5)  # the attack opens its connections
            found = probe(server, seconds - 10, labq)
            for worker in workers:
                worker.join()
            who = "with a valid token" if token else "without a token"
            print(
                f"{count} slow bodies {who} ({sum(opened)} open at most, server descriptors"
                f" {idle} before): {found.summary(base)}"
            )
            _wait_quiet(server, idle)


def _wait_quiet(server: Served, idle: int) -> None:
    """Until the server holds about as many descriptors as before the last attack."""
    deadline = time.monotonic() + 90
    while descriptors(server.pid) > idle + 10 and time.monotonic() < deadline:
        time.sleep(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=20_000)
    # the attack opens its connections for 10 s and measuring stops 5 s before its end
    parser.add_argument("--seconds", type=float, default=40.0, help="the attack's length, > 15")
    parser.add_argument(
        "--bodies",
        type=lambda text: [int(n) for n in text.split(",")],
        help="counts of trickled bodies, e.g. 1200,3000 (instead of trickled heads)",
    )
    args = parser.parse_args()
    if args.seconds <= 15:
        parser.error("--seconds must be more than 15: nothing is measured in the first 10 s")
    labq = str(Path(sys.executable).parent / "labq")
    with served(labq) as server:
        if args.bodies:
            bodies(server, args.bodies, args.seconds, labq)
        else:
            heads(server, args.connections, args.seconds)


def _wait_up(url: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/api/v1/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("the server did not come up")


if __name__ == "__main__":
    main()
