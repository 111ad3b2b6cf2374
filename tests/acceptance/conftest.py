import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from tests.processes import kill_under

ROOT = Path(__file__).parents[2]
EXAMPLES = ROOT / "src" / "labq" / "examples"


def labq_command() -> list[str]:
    """The installed console script, as a user would run it."""
    script = Path(sys.executable).parent / "labq"
    if script.exists():
        return [str(script)]
    found = shutil.which("labq")
    if found is None:
        pytest.fail("the labq command is not installed: pip install -e .")
    return [found]


@pytest.fixture
def labq(tmp_path):
    """Run ``labq`` in a subprocess with a private data directory; returns CompletedProcess."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 60):
        full_env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("LABQ_") or k == "LABQ_TEST_PG_URL"
        }
        full_env["XDG_DATA_HOME"] = str(tmp_path / "data")
        full_env["HOME"] = str(tmp_path / "home")
        full_env.update(env or {})
        return subprocess.run(
            [*labq_command(), *args],
            capture_output=True,
            text=True,
            env=full_env,
            cwd=tmp_path,
            timeout=timeout,
            check=False,
        )

    return run


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_up(url: str, proc: subprocess.Popen[str], log: Path, timeout: float = 30) -> None:
    """Poll ``/api/v1/health`` until it answers 200; fail with the log if the process dies."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/api/v1/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "the server did not come up"
        time.sleep(0.2)


@dataclass
class LiveServer:
    """A ``labq server`` subprocess on SQLite, and its first admin's token."""

    url: str
    token: str
    data: Path


@dataclass
class Running:
    """A ``labq server`` subprocess: its URL, first admin's token, environment and log."""

    url: str
    token: str
    env: dict[str, str]
    log: Path
    pid: int = 0


@contextmanager
def running_server(
    database: str, *, data: Path, home: Path, log: Path, config: Path | None = None
) -> Iterator[Running]:
    """``labq init`` then ``labq server`` on a free port, up; SIGTERM (then kill) afterwards,
    and whatever it started (supervisors, tasks: under ``data``) killed too."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABQ_")}
    env.update(LABQ_DB=database, LABQ_DATA_DIR=str(data), HOME=str(home))
    if config is not None:
        env["LABQ_CONFIG"] = str(config)
    init = subprocess.run(
        [*labq_command(), "init"], env=env, capture_output=True, text=True, check=False
    )
    assert init.returncode == 0, init.stderr
    token = init.stdout.strip().splitlines()[-1]
    port = free_port()
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [*labq_command(), "server", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its group is killed if SIGTERM does not end it
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_until_up(url, proc, log)
            yield Running(url, token, env, log, proc.pid)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                # a server leaves its supervisors running for the next one to adopt: no
                # test has a next one
                kill_under(data)


@pytest.fixture
def live_server(tmp_path):
    """``labq init`` then ``labq server`` on a free port; stopped with SIGTERM afterwards."""
    data = tmp_path / "server-data"
    with running_server(
        f"sqlite:///{tmp_path / 'server.db'}",
        data=data,
        home=tmp_path / "server-home",
        log=tmp_path / "server.log",
    ) as running:
        yield LiveServer(running.url, running.token, data)


# --- a labq server on SQLite or PostgreSQL, driven over HTTP and by the CLI -------------

PG_URL = os.environ.get("LABQ_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
_names = itertools.count()


@contextmanager
def fresh_pg_database(prefix: str = "labq_e2e") -> Iterator[str]:
    """A new PostgreSQL database on ``PG_URL``'s server, dropped afterwards: its URL.
    Skips without a server (fails under ``CI=true``)."""
    admin = create_engine(make_url(PG_URL), isolation_level="AUTOCOMMIT")
    name = f"{prefix}_{os.getpid()}_{next(_names)}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except OperationalError as exc:
        admin.dispose()
        if os.environ.get("CI") == "true":
            pytest.fail(f"no PostgreSQL at {PG_URL}: {exc.orig}")
        pytest.skip(f"no PostgreSQL at {PG_URL}")
    try:
        yield make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'labq.db'}"
        return
    with fresh_pg_database() as url:
        yield url


@pytest.fixture
def server(database_url, tmp_path):
    """A server on the parametrised database: an API client, its data folder, a CLI environment."""
    with running_server(
        database_url, data=tmp_path / "data", home=tmp_path, log=tmp_path / "server.log"
    ) as running:
        client = httpx.Client(
            base_url=f"{running.url}/api/v1",
            headers={"Authorization": f"Bearer {running.token}"},
            timeout=10,
        )
        try:
            yield (
                client,
                tmp_path / "data",
                {
                    **running.env,
                    "LABQ_URL": running.url,
                    "LABQ_TOKEN": running.token,
                },
            )
        finally:
            client.close()


def wait_for(client, job_id, states=("completed", "aborted", "cancelled"), timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/jobs/{job_id}/results").json()
        if job["state"] in states:
            return job
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} still {job['state']}")


def cli(env, *args):
    result = subprocess.run(
        [*labq_command(), *args], env=env, capture_output=True, text=True, check=False, timeout=120
    )
    assert "Traceback" not in result.stderr
    return result
