"""``labq demo``: it comes up, its sample jobs pass, and Ctrl-C stops it cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import httpx
import pytest

from tests.acceptance.conftest import free_port, labq_command, wait_until_up
from tests.processes import as_in_a_terminal, kill_under


def test_demo_runs_its_jobs_and_stops_on_sigint(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABQ_")}
    env["HOME"] = str(tmp_path / "home")
    out_path = tmp_path / "demo.out"
    with open(out_path, "w") as out, _demo(port, tmp_path / "demo", env, out) as proc:
        try:
            url = f"http://127.0.0.1:{port}"
            wait_until_up(url, proc, out_path)
            token = _printed_token(out_path, proc)
            jobs = _wait_for_jobs(url, token)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=20)
    text = out_path.read_text()
    assert code in (0, 130), text
    assert "Traceback" not in text
    assert f"export LABQ_URL={url} LABQ_TOKEN={token}" in text
    assert "Ctrl-C" in text
    assert [(j["state"], j["result"]) for j in jobs] == [("completed", "pass")] * 3
    assert (tmp_path / "demo" / "labq.db").exists()


@pytest.fixture(autouse=True)
def _nothing_left(tmp_path: Path) -> Iterator[None]:
    """Whatever a demo left (its supervisors, their tasks) killed once the test is over."""
    yield
    kill_under(tmp_path)


@contextmanager
def _demo(port: int, root: Path, env: dict[str, str], out: IO[str]) -> Iterator[subprocess.Popen]:
    """``labq demo`` as a terminal starts it: Ctrl-C works even where the tests run with SIGINT
    ignored. Killed with its process group if it still runs afterwards (a test that failed
    before its Ctrl-C, or a Ctrl-C that did not stop it)."""
    proc = subprocess.Popen(
        as_in_a_terminal([*labq_command(), "demo", "--port", str(port), "--dir", str(root)]),
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=root.parent,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _printed_token(path, proc) -> str:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for line in path.read_text().splitlines():
            if line.strip().startswith("lq_"):
                return line.strip()
        assert proc.poll() is None, path.read_text()
        time.sleep(0.1)
    raise AssertionError(f"no token printed:\n{path.read_text()}")


def _wait_for_jobs(url: str, token: str) -> list[dict]:
    headers = {"Authorization": f"Bearer {token}"}
    deadline = time.monotonic() + 20
    with httpx.Client(base_url=f"{url}/api/v1", headers=headers, timeout=5) as client:
        while True:
            jobs = client.get("/jobs").json()["jobs"]
            if len(jobs) == 3 and all(j["state"] in ("completed", "aborted") for j in jobs):
                return jobs
            assert time.monotonic() < deadline, jobs
            time.sleep(0.3)


LONG_JOB = """
whiteboard: still running at Ctrl-C
recipe_sets:
  - recipes:
      - tasks:
          - {name: nap, run: 'exec sleep 300.25', timeout: 600}
"""


def test_ctrl_c_stops_the_supervisors_and_tasks_the_demo_started(tmp_path):
    port = free_port()
    root = tmp_path / "demo"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABQ_")}
    env["HOME"] = str(tmp_path / "home")
    out_path = tmp_path / "demo.out"
    with open(out_path, "w") as out, _demo(port, root, env, out) as proc:
        try:
            url = f"http://127.0.0.1:{port}"
            wait_until_up(url, proc, out_path)
            token = _printed_token(out_path, proc)
            _submit_and_wait_running(url, token, LONG_JOB)
            started = _processes_under(root)
            # found by its command line: in a PID namespace the task's own $$ is not the host's
            (task,) = (
                pid for pid, command in started.items() if command.startswith("sleep 300.25")
            )
            assert any("supervisor" in command for command in started.values()), started
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=60)
    text = out_path.read_text()
    assert code in (0, 130), text
    assert "Traceback" not in text
    survivors = _processes_under(root)
    for pid in survivors:  # the test's own leftovers must not outlive it
        os.kill(pid, signal.SIGKILL)
    assert survivors == {}, text
    assert not _alive(task)
    assert "stopping the supervisors of recipe sets" in text


def _submit_and_wait_running(url: str, token: str, job: str) -> None:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/yaml"}
    with httpx.Client(base_url=f"{url}/api/v1", headers=headers, timeout=5) as client:
        job_id = client.post("/jobs", content=job).json()["id"]
        deadline = time.monotonic() + 30
        while client.get(f"/jobs/{job_id}").json()["state"] != "running":
            assert time.monotonic() < deadline, "the long job never ran"
            time.sleep(0.2)


def _processes_under(root) -> dict[int, str]:
    """Live processes whose command line or working directory lies under ``root``."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            command = (Path("/proc", entry, "cmdline").read_bytes()).replace(b"\0", b" ").decode()
            cwd = os.readlink(f"/proc/{entry}/cwd")
            state = Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # gone, or not ours to look at
        if state != "Z" and (str(root) in command or cwd.startswith(str(root))):
            found[int(entry)] = command
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
