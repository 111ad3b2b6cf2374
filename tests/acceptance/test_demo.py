"""``labq demo``: it comes up, its sample jobs pass, the commands it prints work pasted
into a fresh shell, and SIGINT or SIGTERM stops everything it started."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.acceptance.conftest import free_port, labq_command, wait_until_up

FRESH_PATH = "/usr/bin:/bin"  # a fresh shell's PATH: no labq on it


@dataclass
class Demo:
    proc: subprocess.Popen[str]
    url: str
    out: Path

    def text(self) -> str:
        return self.out.read_text()


@contextmanager
def running_demo(
    tmp_path: Path, *args: str, shell: str | None = None, scan: Path | None = None
) -> Iterator[Demo]:
    """``labq demo`` on a free port, in a session of its own; in the end its process group
    and anything still running under ``scan`` are killed, whatever the test did.

    ``shell``: a bash script that starts it instead, ``{labq}`` and ``{args}`` filled in.
    """
    port = free_port()
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABQ_")}
    env.update(HOME=str(tmp_path / "home"), TMPDIR=str(tmp_path / "tmp"))
    command = [*labq_command(), "demo", "--port", str(port), *args]
    if shell is not None:
        command = ["bash", "-c", shell.format(labq=command[0], args=" ".join(command[1:]))]
    out = tmp_path / "demo.out"
    with open(out, "w") as sink:
        proc = subprocess.Popen(
            command,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=tmp_path,
            start_new_session=True,
        )
    try:
        demo = Demo(proc, f"http://127.0.0.1:{port}", out)
        wait_until_up(demo.url, proc, out)
        yield demo
    finally:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=20)
        for pid in _processes_under(scan or tmp_path / "tmp"):
            os.kill(pid, signal.SIGKILL)


def test_demo_runs_its_jobs_and_its_printed_commands_work_in_a_fresh_shell(tmp_path):
    root = tmp_path / "demo"
    with running_demo(tmp_path, "--dir", str(root), scan=root) as demo:
        token = _printed_token(demo)
        jobs = _wait_for_jobs(demo.url, token)
        commands = _printed_commands(demo)
        pasted = subprocess.run(
            ["bash", "-c", "set -e\n" + "\n".join(commands)],
            env={"PATH": FRESH_PATH, "HOME": str(tmp_path / "home")},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        demo.proc.send_signal(signal.SIGINT)
        code = demo.proc.wait(timeout=60)
    text = demo.text()
    assert [(j["state"], j["result"]) for j in jobs] == [("completed", "pass")] * 3
    assert pasted.returncode == 0, (commands, pasted.stdout, pasted.stderr)
    assert commands[0].startswith("export PATH=")
    assert f"LABQ_URL={demo.url} LABQ_TOKEN={token}" in commands[0]
    assert "labq job logs 1 hello" in commands
    assert "hello from demo-" in pasted.stdout  # the task's own output, not file names
    assert f"{demo.url}/ui/" in text
    assert "token field" in text
    assert code == 0, text
    assert "Traceback" not in text
    assert (root / "labq.db").exists()  # a --dir is the caller's: it stays


LONG_JOB = """
whiteboard: still running at the stop
recipe_sets:
  - recipes:
      - tasks:
          - {name: nap, run: 'exec sleep 300.25', timeout: 600}
"""


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_a_stop_ends_the_supervisors_and_tasks_and_removes_the_directory(tmp_path, stop):
    with running_demo(tmp_path) as demo:
        token = _printed_token(demo)
        _submit_and_wait_running(demo.url, token, LONG_JOB)
        root = _printed_directory(demo)
        # the job reads running as its recipe starts, a moment before the task's command
        # is exec'd: wait for the process (found by its command line: in a PID namespace
        # the task's own $$ is not the host's)
        started = _wait_for_processes(root, "sleep 300.25")
        (task,) = (pid for pid, command in started.items() if command.startswith("sleep 300.25"))
        assert any("supervisor" in command for command in started.values()), started
        demo.proc.send_signal(stop)
        code = demo.proc.wait(timeout=60)
        survivors = _processes_under(tmp_path / "tmp")
    text = demo.text()
    assert code == 0, text
    assert "Traceback" not in text
    assert survivors == {}, text
    assert not _alive(task)
    assert "stopping the supervisors of recipe sets" in text
    assert not root.exists(), text
    assert f"removed {root}" in text


def test_started_in_the_background_by_a_script_sigint_still_stops_it_and_keep_keeps(tmp_path):
    # a non-interactive shell starts background commands with SIGINT ignored
    script = "{labq} {args} & echo $! > demo.pid; wait"
    with running_demo(tmp_path, "--keep", shell=script) as demo:
        _printed_token(demo)
        root = _printed_directory(demo)
        pid = int((tmp_path / "demo.pid").read_text())
        os.kill(pid, signal.SIGINT)
        code = demo.proc.wait(timeout=60)  # the shell ends when the demo does
    text = demo.text()
    assert code == 0, text
    assert "SIGINT: stopping" in text
    assert (root / "labq.db").exists(), text
    assert f"its database and logs stay in {root}" in text


def _printed_token(demo: Demo) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for line in demo.text().splitlines():
            if line.strip().startswith("lq_"):
                return line.strip()
        assert demo.proc.poll() is None, demo.text()
        time.sleep(0.1)
    raise AssertionError(f"no token printed:\n{demo.text()}")


def _printed_commands(demo: Demo) -> list[str]:
    """The indented lines after "Try, in another shell", as a person would paste them."""
    lines = demo.text().split("Try, in another shell", 1)[1].splitlines()[2:]
    commands = []
    for line in lines:
        if not line.startswith("  "):
            break
        commands.append(line.strip())
    return commands


def _printed_directory(demo: Demo) -> Path:
    for line in demo.text().splitlines():
        if "Database, workspaces and logs: " in line:
            return Path(line.split("Database, workspaces and logs: ", 1)[1].strip())
    raise AssertionError(f"no directory printed:\n{demo.text()}")


def _wait_for_jobs(url: str, token: str) -> list[dict]:
    headers = {"Authorization": f"Bearer {token}"}
    deadline = time.monotonic() + 60
    with httpx.Client(base_url=f"{url}/api/v1", headers=headers, timeout=5) as client:
        while True:
            jobs = client.get("/jobs").json()["jobs"]
            if len(jobs) == 3 and all(j["state"] in ("completed", "aborted") for j in jobs):
                return jobs
            assert time.monotonic() < deadline, jobs
            time.sleep(0.3)


def _submit_and_wait_running(url: str, token: str, job: str) -> None:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/yaml"}
    with httpx.Client(base_url=f"{url}/api/v1", headers=headers, timeout=5) as client:
        job_id = client.post("/jobs", content=job).json()["id"]
        deadline = time.monotonic() + 60
        while client.get(f"/jobs/{job_id}").json()["state"] != "running":
            assert time.monotonic() < deadline, "the long job never ran"
            time.sleep(0.2)


def _wait_for_processes(root: Path, command: str) -> dict[int, str]:
    """:func:`_processes_under` once one of them runs ``command``."""
    deadline = time.monotonic() + 60
    while True:
        found = _processes_under(root)
        if any(line.startswith(command) for line in found.values()):
            return found
        assert time.monotonic() < deadline, f"no {command!r} under {root}: {found}"
        time.sleep(0.2)


def _processes_under(root: Path) -> dict[int, str]:
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
