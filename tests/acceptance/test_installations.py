"""Installations on one host share nothing on disk; a data directory belongs to one database."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.acceptance.conftest import cli, free_port, labq_command, wait_for, wait_until_up

JOB = """
recipe_sets:
  - recipes:
      - tasks:
          - name: mine
            run: 'echo "written by $INSTALLATION" | tee mine.txt; echo more >> mine.txt'
"""


def environment(home: Path, **extra: str) -> dict[str, str]:
    """No LABQ_* of the test run's own; a private home whose user data directory is shared."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABQ_")}
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / "share"), **extra)
    return env


@contextmanager
def serving(env: dict[str, str], log: Path) -> Iterator[tuple[str, str]]:
    """``labq init`` and ``labq server`` with no --db: the URL and the admin's token."""
    init = subprocess.run(
        [*labq_command(), "init"], env=env, capture_output=True, text=True, check=False
    )
    assert init.returncode == 0, init.stderr
    token = init.stdout.strip().splitlines()[-1]
    port = free_port()
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*labq_command(), "server", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_up(url, proc, log)
            yield url, token
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=20)


def errors_of(stderr: str) -> list[str]:
    """What the command said to the person (its log lines aside): one line, no traceback."""
    assert "Traceback" not in stderr
    return [line for line in stderr.splitlines() if line.startswith("labq:")]


def run_one_job(url: str, token: str, env: dict[str, str], job_file: Path) -> dict[str, object]:
    session = {**env, "LABQ_URL": url, "LABQ_TOKEN": token}
    assert cli(session, "lab", "add", "lab1").returncode == 0
    assert cli(session, "system", "add", "same.fqdn", "--lab", "lab1").returncode == 0
    submitted = cli(session, "job", "submit", str(job_file), "--wait", "--json")
    assert submitted.returncode == 0, submitted.stderr
    job_id = json.loads(submitted.stdout)["id"]
    assert job_id == 1  # both installations have a job 1, a set 1, a system same.fqdn
    with httpx.Client(
        base_url=f"{url}/api/v1", headers={"Authorization": f"Bearer {token}"}, timeout=10
    ) as client:
        job: dict[str, object] = wait_for(client, job_id)
        job["logs"] = client.get(f"/jobs/{job_id}/logs").json()["logs"]
    return job


def test_two_installations_with_their_own_data_directories_share_nothing(tmp_path: Path) -> None:
    job_file = tmp_path / "job.yaml"
    dirs = {name: tmp_path / name for name in ("first", "second")}
    home = tmp_path / "home"
    logs: dict[str, str] = {}
    for name, data in dirs.items():
        env = environment(home, LABQ_DATA_DIR=str(data))
        job_file.write_text(JOB.replace("$INSTALLATION", name))
        with serving(env, tmp_path / f"{name}.log") as (url, token):
            job = run_one_job(url, token, env, job_file)
        assert job["state"] == "completed"
        logs[name] = "".join(p.read_text() for p in (data / "logs").rglob("task-*.log"))
    for name, data in dirs.items():
        other = "second" if name == "first" else "first"
        assert (data / "labq.db").is_file(), "each installation's database is in its data dir"
        assert f"written by {name}" in logs[name]
        assert f"written by {other}" not in logs[name]
        assert (data / "workspaces" / "same.fqdn" / "mine.txt").read_text() == (
            f"written by {name}\nmore\n"
        )
    assert not (home / "share" / "labq").exists(), "nothing went to the shared user data dir"


def test_a_server_refuses_a_data_directory_that_belongs_to_another_database(
    tmp_path: Path,
) -> None:
    home, data = tmp_path / "home", tmp_path / "data"
    env = environment(home, LABQ_DATA_DIR=str(data))
    with serving(env, tmp_path / "first.log"):
        pass
    other = {**env, "LABQ_DB": f"sqlite:///{tmp_path / 'other.db'}"}
    assert subprocess.run([*labq_command(), "init"], env=other, check=False).returncode == 0
    refused = subprocess.run(
        [*labq_command(), "server", "--port", str(free_port())],
        env=other,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2
    (line,) = errors_of(refused.stderr)
    assert line.startswith(f"labq: data directory {data} belongs to another labq installation")
    assert "--data-dir" in line


def test_a_second_server_on_one_sqlite_file_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    database = tmp_path / "shared.db"
    first = environment(home, LABQ_DATA_DIR=str(tmp_path / "a"), LABQ_DB=f"sqlite:///{database}")
    with serving(first, tmp_path / "first.log"):
        second = {**first, "LABQ_DATA_DIR": str(tmp_path / "b")}
        refused = subprocess.run(
            [*labq_command(), "server", "--port", str(free_port())],
            env=second,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert refused.returncode == 2
    (line,) = errors_of(refused.stderr)
    assert line.startswith("labq: another labq server (pid ")
    assert line.endswith(f"runs on {database}: one server per SQLite database")
