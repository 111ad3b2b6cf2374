import atexit
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
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


def wait_until_up(url: str, proc: subprocess.Popen[str], log: Path, timeout: float = 120) -> None:
    """Poll ``/api/v1/health`` until it answers 200; fail with the log if the process dies.
    Generous: on a loaded machine a server's imports alone took 25 s and its first answer
    more than the 30 s this used to allow (the wait ends as soon as it answers)."""
    deadline = time.monotonic() + timeout
    # one client for every try: each new one loads the CA bundle (~60 ms of CPU), which
    # polling a starting server five times a second made 1.5 s per server
    with httpx.Client(timeout=2) as client:
        while True:
            try:
                if client.get(f"{url}/api/v1/health").status_code == 200:
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


def labq_init(env: dict[str, str]) -> str:
    """``labq init`` in ``env``: the first admin's token it prints."""
    init = subprocess.run(
        [*labq_command(), "init"], env=env, capture_output=True, text=True, check=False
    )
    assert init.returncode == 0, init.stderr
    return init.stdout.strip().splitlines()[-1]


# Each test worker runs the real ``labq init`` once per kind of database and copies what it
# made: init costs seconds of CPU (its imports and fourteen migrations), and a server per
# test made it a tenth of the suite. ``tests/acceptance/test_cli_init.py`` and the
# installation tests run it themselves.
_templates: dict[str, tuple[str, str]] = {}  # kind -> (template database, its admin's token)


def from_template(database: str) -> str | None:
    """Make ``database`` (a SQLite file not there yet, or a PostgreSQL database just
    created and still empty) a copy of this worker's initialised one: the first admin's
    token. None when it is neither: ``labq init`` must run on it."""
    url = make_url(database)
    if url.get_backend_name() == "sqlite":
        target = Path(url.database or "")
        if not url.database or target.exists():
            return None
        template, token = _template("sqlite")
        shutil.copyfile(template, target)
        return token
    if url.get_backend_name() != "postgresql" or not _empty_pg(database):
        return None
    template, token = _template("postgresql")
    name = url.database
    _pg_admin(f'DROP DATABASE "{name}"', f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return token


def _template(kind: str) -> tuple[str, str]:
    if kind not in _templates:
        home = Path(tempfile.mkdtemp(prefix="labq-template-"))
        if kind == "sqlite":
            where = str(home / "template.db")
            url = f"sqlite:///{where}"
        else:
            where = f"labq_template_{os.getpid()}"
            url = make_url(PG_URL).set(database=where).render_as_string(hide_password=False)
            _create_pg(where)
        atexit.register(shutil.rmtree, home, ignore_errors=True)
        if kind != "sqlite":
            atexit.register(_drop_pg, where)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LABQ_")}
        env.update(LABQ_DB=url, LABQ_DATA_DIR=str(home / "data"), HOME=str(home))
        _templates[kind] = (where, labq_init(env))
    return _templates[kind]


def _create_pg(name: str) -> None:
    _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')


def _drop_pg(name: str) -> None:
    _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _pg_admin(*statements: str) -> None:
    """Run ``statements`` (each outside a transaction, as CREATE DATABASE must) on ``PG_URL``."""
    admin = create_engine(make_url(PG_URL), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            for statement in statements:
                conn.execute(text(statement))
    finally:
        admin.dispose()


def _empty_pg(database: str) -> bool:
    engine = create_engine(make_url(database))
    try:
        with engine.connect() as conn:
            tables = conn.execute(
                text("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
            ).scalar_one()
            return tables == 0
    finally:
        engine.dispose()


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
    token = from_template(database)
    if token is None:
        token = labq_init(env)
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


@contextmanager
def sqlite_server(tmp_path: Path, config: Path | None = None) -> Iterator[LiveServer]:
    """A server on SQLite with everything under ``tmp_path`` (``config``: its settings)."""
    data = tmp_path / "server-data"
    with running_server(
        f"sqlite:///{tmp_path / 'server.db'}",
        data=data,
        home=tmp_path / "server-home",
        log=tmp_path / "server.log",
        config=config,
    ) as running:
        yield LiveServer(running.url, running.token, data)


@pytest.fixture
def live_server(tmp_path):
    """``labq init`` then ``labq server`` on a free port; stopped with SIGTERM afterwards."""
    with sqlite_server(tmp_path) as server:
        yield server


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
