"""Restarts and failures of real processes: the server, a supervisor, a task.

Each test runs ``labq server`` as a subprocess (SQLite and PostgreSQL) with a
settings file that makes the consistency pass and the heartbeat timeout short,
then breaks something with a signal and checks that the job ends as the retry
rules say, that no system was given to two recipes at once, and that no job
was lost.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from labq.dispatch.procs import process_alive
from tests.acceptance.conftest import free_port, from_template, labq_command, labq_init

SETTINGS = """
consistency_every: 1
heartbeat_every: 0.5
health:
  heartbeat_timeout: 5  # generous: a loaded test machine must not look like a hang
  max_consecutive_aborts: 10
"""

SLOW_JOB = """
whiteboard: slow
recipe_sets:
  - max_retries: 1
    recipes:
      - tasks:
          - {name: slow, run: 'sleep 4; echo "done on $LABQ_FQDN" > done.txt', timeout: 60}
"""

OVERRUN_JOB = """
whiteboard: overrun
recipe_sets:
  - max_retries: 1
    recipes:
      - tasks:
          - {name: overrun, run: 'echo started; sleep 30', timeout: 2}
"""


class LabServer:
    """``labq server`` processes over one database and one data directory."""

    up_within = 30.0  # seconds a server may take to answer its health endpoint

    def __init__(self, url: str, root: Path, *, settings: str = SETTINGS):
        self.url = url
        self.root = root
        self.data = root / "data"
        config = root / "labq.yaml"
        config.write_text(settings)
        self.config = config
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("LABQ_")}
        self.env.update(LABQ_DB=url, LABQ_DATA_DIR=str(self.data), HOME=str(root))
        self.token = from_template(url) or labq_init(self.env)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.clients: list[httpx.Client] = []
        self.logs: list[Path] = []

    def start(self) -> tuple[subprocess.Popen[bytes], httpx.Client]:
        """One more server; returns once its health endpoint answers."""
        port = free_port()
        log_path = self.root / f"server-{len(self.procs)}.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [*labq_command(), "server", "--port", str(port), "--config", str(self.config)],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        client = httpx.Client(
            base_url=f"http://127.0.0.1:{port}/api/v1",
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=10,
        )
        self.procs.append(proc)
        self.clients.append(client)
        self.logs.append(log_path)
        deadline = time.monotonic() + self.up_within
        while True:
            try:
                if client.get("/health").status_code == 200:
                    return proc, client
            except httpx.TransportError:
                pass
            assert proc.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, "the server did not come up"
            time.sleep(0.2)

    def close(self) -> None:
        for client in self.clients:
            client.close()
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        # supervisors run in process groups of their own: end any a test left behind
        for pid in self.supervisor_pids(every=True):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)

    def sql(self, query: str, **params: object) -> list[tuple[object, ...]]:
        engine = create_engine(self.url)
        try:
            with engine.connect() as conn:
                return [tuple(row) for row in conn.execute(text(query), params)]
        finally:
            engine.dispose()

    def supervisor_pids(self, *, every: bool = False) -> list[int]:
        where = "" if every else " AND finished_at IS NULL"
        rows = self.sql(
            f"SELECT supervisor_pid FROM recipe_sets WHERE supervisor_pid IS NOT NULL{where}"
        )
        return [int(str(row[0])) for row in rows]


@pytest.fixture
def lab(database_url, tmp_path):
    server = LabServer(database_url, tmp_path)
    yield server
    server.close()


def add_lab(client: httpx.Client, *fqdns: str) -> None:
    assert client.post("/labs", json={"name": "lab1"}).status_code == 201
    for fqdn in fqdns:
        assert client.post("/systems", json={"fqdn": fqdn, "lab": "lab1"}).status_code == 201


def submit(client: httpx.Client, job: str) -> int:
    created = client.post("/jobs", content=job, headers={"Content-Type": "application/yaml"})
    assert created.status_code == 201, created.text
    return int(created.json()["id"])


def wait_until(check, what: str, timeout: float = 40.0, every: float = 0.2):
    """Poll ``check`` until it returns something true; that value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
        except httpx.TransportError:
            value = None
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


def job_state(client: httpx.Client, job_id: int, *states: str) -> dict | None:
    job = client.get(f"/jobs/{job_id}").json()
    return job if job["state"] in states else None


def running_recipe(client: httpx.Client, job_id: int) -> dict | None:
    job = client.get(f"/jobs/{job_id}").json()
    for rset in job["sets"]:
        for recipe in rset["recipes"]:
            if recipe["state"] == "running" and recipe["tasks"][0]["status"] == "running":
                return recipe
    return None


def all_idle(client: httpx.Client, *fqdns: str) -> bool:
    return all(client.get(f"/systems/{f}").json()["usage"] == "idle" for f in fqdns)


def assert_never_double_booked(client: httpx.Client, *fqdns: str) -> None:
    """Each system's usage history is one period after another, each held by one recipe."""
    for fqdn in fqdns:
        history = client.get(f"/systems/{fqdn}/history").json()["history"]
        periods = sorted(history, key=lambda row: row["start"])
        for before, after in itertools.pairwise(periods):
            assert before["end"] is not None, history
            assert before["end"] <= after["start"], history
        held = {}
        for row in periods:
            if row["recipe"] is not None:
                held.setdefault(row["recipe"], []).append((row["start"], row["end"]))
        spans = sorted((min(s for s, _ in v), max(e or 1e18 for _, e in v)) for v in held.values())
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert end <= start, f"{fqdn} held by two recipes at once: {history}"


def test_a_server_killed_mid_job_restarts_and_the_job_ends(lab):
    _, client = lab.start()
    fqdns = ("a.lab1", "b.lab1")
    add_lab(client, *fqdns)
    job_id = submit(client, SLOW_JOB)
    wait_until(lambda: running_recipe(client, job_id), "the task to run")
    lab.procs[0].send_signal(signal.SIGKILL)
    lab.procs[0].wait()

    _, client = lab.start()  # rebuilds from the database and adopts the supervisor
    job = wait_until(lambda: job_state(client, job_id, "completed", "aborted"), "the job to end")
    # the supervisor outlived the server: the job completed on its first attempt
    assert job["state"] == "completed", job
    assert len(job["sets"]) == 1
    (recipe,) = job["sets"][0]["recipes"]
    done = lab.data.rglob("done.txt")
    assert any(f"done on {recipe['system']}" in p.read_text() for p in done)
    wait_until(lambda: all_idle(client, *fqdns), "the systems to be idle again")
    assert_never_double_booked(client, *fqdns)
    # nothing lost, nothing run twice: the one job, the one task, one pass
    assert client.get("/jobs").json()["total"] == 1
    assert [t["result"] for t in recipe["tasks"]] == ["pass"]


def test_a_killed_supervisor_aborts_its_set_and_the_retry_runs_elsewhere(lab):
    _, client = lab.start()
    fqdns = ("a.lab1", "b.lab1")
    add_lab(client, *fqdns)
    job_id = submit(client, SLOW_JOB)
    first = wait_until(lambda: running_recipe(client, job_id), "the task to run")
    (pid,) = lab.supervisor_pids()
    os.killpg(pid, signal.SIGKILL)  # the supervisor and its task

    job = wait_until(lambda: job_state(client, job_id, "completed", "aborted"), "the job to end")
    first_set, retry = job["sets"]
    assert first_set["recipes"][0]["state"] == "aborted"
    assert retry["attempt"] == 2
    assert retry["retry_of"] == first_set["id"]
    (again,) = retry["recipes"]
    assert again["state"] == "completed"
    assert again["system"] != first["system"]
    wait_until(lambda: all_idle(client, *fqdns), "the systems to be idle again")
    assert_never_double_booked(client, *fqdns)


@pytest.mark.alone  # its heartbeat timeout is seconds: timing is its point, and it waits
def test_a_hung_supervisor_is_caught_by_the_consistency_pass(lab):
    """A supervisor that stops heart-beating (frozen, so the server still sees it alive)."""
    _, client = lab.start()
    fqdns = ("a.lab1", "b.lab1")
    add_lab(client, *fqdns)
    job_id = submit(client, SLOW_JOB)
    first = wait_until(lambda: running_recipe(client, job_id), "the task to run")
    (pid,) = lab.supervisor_pids()
    os.killpg(pid, signal.SIGSTOP)
    try:
        job = wait_until(
            lambda: job_state(client, job_id, "completed", "aborted"), "the job to end"
        )
        assert not process_alive(pid), "the server killed it before handing its system on"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    first_set, retry = job["sets"]
    assert first_set["recipes"][0]["state"] == "aborted"
    assert first_set["stop_reason"] == "the supervisor stopped heart-beating"
    (again,) = retry["recipes"]
    assert again["state"] == "completed"
    assert again["system"] != first["system"]
    wait_until(lambda: all_idle(client, *fqdns), "the systems to be idle again")
    assert_never_double_booked(client, *fqdns)


def test_a_task_overrunning_its_timeout_aborts_the_set_and_is_retried_elsewhere(lab):
    _, client = lab.start()
    fqdns = ("a.lab1", "b.lab1")
    add_lab(client, *fqdns)
    job_id = submit(client, OVERRUN_JOB)
    job = wait_until(
        lambda: (
            job_state(client, job_id, "aborted")
            if len(client.get(f"/jobs/{job_id}").json()["sets"]) == 2
            else None
        ),
        "both attempts to end",
    )
    first_set, retry = job["sets"]
    assert first_set["state"] == retry["state"] == "aborted"
    systems = {s["recipes"][0]["system"] for s in job["sets"]}
    assert systems == set(fqdns), "the retry ran on the other system"
    for rset in job["sets"]:
        (task,) = rset["recipes"][0]["tasks"]
        assert task["result"] == "fail"
    # the logs were archived, timed-out task included
    logs = client.get(f"/jobs/{job_id}/logs").json()["logs"]
    assert logs
    archived = "\n".join(p.read_text() for p in lab.data.rglob("task-*.log"))
    assert archived.count("started") >= 2
    wait_until(lambda: all_idle(client, *fqdns), "the systems to be released")
    assert_never_double_booked(client, *fqdns)
