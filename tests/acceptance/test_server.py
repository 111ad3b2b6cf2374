"""``labq server`` as a subprocess, driven over HTTP, running a real two-host job."""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import time

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from tests.acceptance.conftest import labq_command

PG_URL = os.environ.get("LABQ_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
_names = itertools.count()

JOB = """
whiteboard: two hosts
recipe_sets:
  - max_time: 120
    recipes:
      - role: server
        tasks:
          - name: hello
            run: 'echo "I am $LABQ_FQDN, client is $CLIENT" | tee hello.txt'
            timeout: 30
      - role: client
        tasks:
          - {name: hello, run: 'echo "server is $SERVER"', timeout: 30}
"""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'labq.db'}"
        return
    admin = create_engine(make_url(PG_URL), isolation_level="AUTOCOMMIT")
    name = f"labq_e2e_{os.getpid()}_{next(_names)}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except OperationalError as exc:
        admin.dispose()
        if os.environ.get("CI") == "true":
            pytest.fail(f"no PostgreSQL at {PG_URL}: {exc.orig}")
        pytest.skip(f"no PostgreSQL at {PG_URL}")
    yield make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def server(database_url, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABQ_")}
    env.update(LABQ_DB=database_url, LABQ_DATA_DIR=str(tmp_path / "data"), HOME=str(tmp_path))
    init = subprocess.run(
        [*labq_command(), "init"], env=env, capture_output=True, text=True, check=False
    )
    assert init.returncode == 0, init.stderr
    token = init.stdout.strip().splitlines()[-1]
    port = free_port()
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [*labq_command(), "server", "--port", str(port)], env=env, stdout=log, stderr=log
    )
    client = httpx.Client(
        base_url=f"http://127.0.0.1:{port}/api/v1",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            if client.get("/health").status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert proc.poll() is None, (tmp_path / "server.log").read_text()
        assert time.monotonic() < deadline, "the server did not come up"
        time.sleep(0.2)
    cli_env = {**env, "LABQ_URL": f"http://127.0.0.1:{port}", "LABQ_TOKEN": token}
    yield client, tmp_path / "data", cli_env
    client.close()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()


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


def test_a_two_host_job_runs_to_completion(server, tmp_path):
    client, data, env = server
    assert cli(env, "lab", "add", "lab1").returncode == 0
    for fqdn in ("a.lab1", "b.lab1"):
        added = cli(env, "system", "add", fqdn, "--lab", "lab1", "--attr", "memory_mb=4096")
        assert added.returncode == 0, added.stderr
    job_file = tmp_path / "two-hosts.yaml"
    job_file.write_text(JOB)
    submitted = cli(env, "job", "submit", str(job_file), "--wait", "--json")
    assert submitted.returncode == 0, submitted.stderr
    job_id = json.loads(submitted.stdout)["id"]
    job = wait_for(client, job_id)
    assert job["state"] == "completed"
    assert job["result"] == "pass"
    (rs,) = job["sets"]
    systems = {r["system"] for r in rs["recipes"]}
    assert systems == {"a.lab1", "b.lab1"}
    # each role's FQDNs reached the other recipe's task, and the logs were archived
    logs = {p.name: p.read_text() for p in (data / "logs").rglob("task-*.log")}
    text_ = "\n".join(logs.values())
    server_fqdn = next(r["system"] for r in rs["recipes"] if r["tasks"][0]["id"] == 1)
    client_fqdn = (systems - {server_fqdn}).pop()
    assert f"client is {client_fqdn}" in text_
    assert f"server is {server_fqdn}" in text_
    listed = client.get(f"/jobs/{job_id}/logs").json()
    assert listed  # the API lists the archived logs too
    # the file the server's task wrote is in its workspace
    assert (data / "workspaces" / server_fqdn / "hello.txt").read_text().startswith("I am ")
    # every recipe went through the whole lifecycle, in order
    for recipe in client.get(f"/jobs/{job_id}/history").json()["recipes"]:
        states = [h["state"] for h in recipe["history"]]
        assert states == ["new", "scheduled", "waiting", "installing", "running", "completed"]
    # the systems go idle once the scheduler has heard the set end; their history shows all
    deadline = time.monotonic() + 20
    while {client.get(f"/systems/{f}").json()["usage"] for f in systems} != {"idle"}:
        assert time.monotonic() < deadline, "the systems were not released"
        time.sleep(0.2)
    for fqdn in systems:
        history = client.get(f"/systems/{fqdn}/history").json()["history"]
        usages = [row["usage"] for row in history]
        for usage in ("scheduled", "waiting", "installing", "running", "idle"):
            assert usage in usages
        assert usages.index("scheduled") < usages.index("running") < len(usages)
