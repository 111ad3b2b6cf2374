"""What the lab agent tests share: a server with fast heartbeats, agents as real processes,
and a TCP proxy to cut an agent off from the server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from .conftest import labq_command, running_server


def agent_command() -> tuple[str, ...]:
    """``labq agent``: the command an admin runs."""
    return (*labq_command(), "agent")


@dataclass
class Server:
    """A ``labq server`` and an admin's API client."""

    url: str
    client: httpx.Client
    data: Path
    database: str
    pid: int

    def agent_token(self, name: str, *labs: str) -> str:
        made = self.client.post("/agents", json={"name": name, "labs": list(labs)})
        assert made.status_code == 201, made.text
        token: str = made.json()["token"]
        return token

    def lab(self, name: str, *systems: str) -> None:
        assert self.client.post("/labs", json={"name": name}).status_code == 201
        for fqdn in systems:
            added = self.client.post("/systems", json={"fqdn": fqdn, "lab": name})
            assert added.status_code == 201, added.text

    def submit(self, job: dict[str, object]) -> int:
        sent = self.client.post("/jobs", json=job)
        assert sent.status_code in (200, 201), sent.text
        job_id: int = sent.json()["id"]
        return job_id

    def results(self, job_id: int) -> dict[str, object]:
        answer: dict[str, object] = self.client.get(f"/jobs/{job_id}/results").json()
        return answer

    def log_text(self, job_id: int, path: str) -> str:
        got = self.client.get(f"/jobs/{job_id}/logs/file", params={"path": path})
        assert got.status_code == 200, got.text
        return got.text


@contextmanager
def agent_server(tmp_path: Path, database: str, *, timeout: float = 20.0) -> Iterator[Server]:
    """A server whose supervisors beat every second and time out after ``timeout`` seconds
    (looked for every second)."""
    config = tmp_path / "server.yaml"
    config.write_text(
        f"heartbeat_every: 1\nconsistency_every: 1\nhealth:\n  heartbeat_timeout: {timeout}\n"
    )
    data = tmp_path / "server-data"
    with running_server(
        database, data=data, home=tmp_path, log=tmp_path / "server.log", config=config
    ) as running:
        client = httpx.Client(
            base_url=f"{running.url}/api/v1",
            headers={"Authorization": f"Bearer {running.token}"},
            timeout=20,
        )
        try:
            yield Server(running.url, client, data, database, running.pid)
        finally:
            client.close()


@dataclass
class Agent:
    """A ``labq agent`` process (started again with :meth:`start` after a kill)."""

    url: str
    token: str
    data: Path
    log: Path
    extra: tuple[str, ...] = ()
    proc: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)

    def start(self) -> Agent:
        # what a lab host has: no LABQ_* at all, the token in the environment
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("LABQ_")}
        self.env["LABQ_AGENT_TOKEN"] = self.token
        self.env["HOME"] = str(self.data.parent)
        command = [*agent_command(), "--url", self.url, "--data-dir", str(self.data), *self.extra]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
            )
        wait_until(lambda: "serves" in self.output(), 30, self.output)
        return self

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()

    def supervisor_pids(self) -> list[int]:
        """Every process of this agent's supervisors (forked or spawned, and the keeper of a
        PID namespace), known by the sets its data directory records and by working in that
        directory: set ids are per database, and a test beside this one has a set 1 too."""
        sets = [p.name.removeprefix("set-") for p in (self.data / "sets").glob("set-*")]
        wanted = [f"--set\0{n}\0".encode() for n in sets]
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes() + b"\0"
                if b"labq.agent.supervisor" not in cmdline or not any(w in cmdline for w in wanted):
                    continue
                if (entry / "cwd").resolve() != self.data.resolve():
                    continue
            except OSError:
                continue
            found.append(int(entry.name))
        return found


@contextmanager
def agents(*made: Agent) -> Iterator[None]:
    """Agents stopped afterwards, and whatever supervisors they left killed."""
    try:
        yield
    finally:
        for agent in made:
            agent.stop()
            for pid in agent.supervisor_pids():
                with suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)


def wait_until(
    condition: Callable[[], object], timeout: float, what: Callable[[], str] = lambda: ""
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting; {what()}"
        time.sleep(0.2)


def wait_state(server: Server, job_id: int, states: tuple[str, ...], timeout: float = 60) -> dict:
    found: dict[str, object] = {}

    def done() -> bool:
        found.update(server.results(job_id))
        return found["state"] in states

    wait_until(done, timeout, lambda: f"job {job_id} is {found.get('state')}")
    return found


class Proxy:
    """A TCP proxy to the server that can be paused: while paused no byte passes either
    way (connections stall, as behind a broken link); resuming drops the stalled ones."""

    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open = threading.Event()
        self.open.set()
        self.closed = False
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def pause(self) -> None:
        self.open.clear()

    def resume(self) -> None:
        with self.lock:
            stalled, self.sockets = self.sockets, []
        for sock in stalled:
            sock.close()
        self.open.set()

    def close(self) -> None:
        self.closed = True
        self.listener.close()
        self.resume()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        self.open.wait()
        try:
            upstream = socket.create_connection(self.target)
        except OSError:
            client.close()
            return
        with self.lock:
            self.sockets += [client, upstream]
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                self.open.wait()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
