"""A real ``labq server`` under 20,000 trickling connections: served, and its descriptors bounded.

    .venv/bin/python bench/slow_clients.py [--connections 20000] [--seconds 40]

Starts ``labq init`` and ``labq server`` (SQLite, default settings: at most 1000
connections, a request head within 10 s) in a temporary directory. Measures a
normal client first (sequential ``GET /api/v1/health``), then again while worker
processes keep ``--connections`` sockets open on the server, each sending a
request head one byte per second and reconnecting whenever the server closes
it. Prints the normal client's median and p99 latency under attack as a ratio
to the baseline of the same run, its failures, how many connections the attack
had open, and the most descriptors the server held (from /proc).
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
from pathlib import Path
from typing import Any

import httpx

from labq.config import Server
from labq.serving import ConnectionLimits, accept_backlog

PER_WORKER = 9_000  # below the usual 10,000-descriptor soft limit once raised
HEAD = b"GET /api/v1/health HTTP/1.1\r\nHost: bench\r\nUser-Agent: trickle\r\n"


def trickle(port: int, count: int, seconds: float, opened: Any, slot: int) -> None:
    """Keep ``count`` connections trickling a request head for ``seconds``; reopen closed ones."""
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
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
            sent[sock] = 0
        opened[slot] = max(opened[slot], len(sent))
        for key, _ in selector.select(timeout=0):  # readable: the server answered or closed
            _drop(selector, sent, key.fileobj)  # type: ignore[arg-type]
        for sock in list(sent):
            try:
                sock.send(HEAD[sent[sock] : sent[sock] + 1] or b"X")
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=40.0)
    args = parser.parse_args()
    labq = str(Path(sys.executable).parent / "labq")
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LABQ_")}
        env.update(LABQ_DB=f"sqlite:///{tmp}/labq.db", LABQ_DATA_DIR=f"{tmp}/data", HOME=tmp)
        subprocess.run([labq, "init"], env=env, check=True, capture_output=True)
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
            idle = descriptors(server.pid)
            base, base_failures = normal_client(url, 200)
            counts = [min(PER_WORKER, left) for left in range(args.connections, 0, -PER_WORKER)]
            opened = multiprocessing.Array("i", len(counts))
            workers = [
                multiprocessing.Process(target=trickle, args=(port, n, args.seconds, opened, i))
                for i, n in enumerate(counts)
            ]
            for worker in workers:
                worker.start()
            peak, attacked, failures = idle, [], 0
            ends = time.monotonic() + args.seconds - 5
            time.sleep(10)  # the attack opens its connections
            while time.monotonic() < ends:
                peak = max(peak, descriptors(server.pid))
                batch, failed = normal_client(url, 10)
                attacked += batch
                failures += failed
                peak = max(peak, descriptors(server.pid))
            for worker in workers:
                worker.join()
        finally:
            server.terminate()
            server.wait(timeout=30)
            log.close()
    limits = ConnectionLimits(10.0, 60.0, Server().max_connections)
    ms = 1000
    print(f"attack: {args.connections} trickling connections wanted, {sum(opened)} open at most")
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
