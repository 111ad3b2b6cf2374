"""Every command the README prints, run as printed: in a fresh shell (bash, with only
PATH and HOME, no labq on PATH), from a fresh copy of the repository's files.

The install-and-demo line runs first (a real ``pip install .`` into the copy's
``.venv``), then the commands the demo prints, pasted into another shell; then the
README's own server (shell one) and client (shell two) and the five verbs, and the
"Using it" and simulation lines. A README block no test here runs fails
:func:`test_every_readme_example_is_run_here`.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import URL, Engine, create_engine, make_url, text
from sqlalchemy.exc import OperationalError

from tests.acceptance.conftest import ROOT

# one install, and the README's port 8080 is one: the module runs in the phase with nothing
# beside it (in a full run beside other tests, a labq server that was not the README's
# answered on 8080 between the port check and the README's `labq server`)
pytestmark = [pytest.mark.xdist_group("readme"), pytest.mark.slow, pytest.mark.alone]

README = ROOT / "README.md"
HEADLINE = "python3 -m venv .venv && .venv/bin/pip install -q . && .venv/bin/labq demo"
SERVER_URL = "http://127.0.0.1:8080"  # the demo's and the server's default, as the README says
INSTALL_SECONDS = 600.0  # pip install on a loaded machine
NOT_RUN = {
    "bash scripts/test": "the test suite itself",
}


def readme_blocks() -> list[str]:
    """The README's ``sh`` code blocks, in order."""
    return [b.strip() for b in re.findall(r"```sh\n(.*?)```", README.read_text(), re.S)]


def kind(block: str) -> str:
    """Which of the README's examples a block is (``unknown`` when none)."""
    if block == HEADLINE:
        return "headline"
    if block in NOT_RUN:
        return "not run"
    first = next(line for line in block.splitlines() if not line.startswith("#"))
    tests = {
        "server": "labq server" in block,
        "client": "export LABQ_URL=" in block,
        "verbs": block.startswith("labq job watch"),
        "using": block.startswith("labq validate"),
        "sim": first.startswith("labq sim"),
    }
    found = [name for name, matches in tests.items() if matches]
    return found[0] if len(found) == 1 else "unknown"


def block(name: str) -> str:
    (found,) = [b for b in readme_blocks() if kind(b) == name]
    return found


def test_every_readme_example_is_run_here():
    kinds = [kind(b) for b in readme_blocks()]
    assert "unknown" not in kinds, [b for b in readme_blocks() if kind(b) == "unknown"]
    assert sorted(kinds) == sorted(
        ["headline", "server", "client", "verbs", "using", "sim", "not run"]
    )
    # the headline commands the README must keep
    assert HEADLINE in readme_blocks()
    assert "bash scripts/test" in readme_blocks()


# --- a fresh copy of the repository, and a fresh shell ---------------------------------


def fresh_env(home: Path) -> dict[str, str]:
    """A new login's environment: PATH without any labq on it, and HOME."""
    path = [d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "labq").exists()]
    return {"PATH": os.pathsep.join(path), "HOME": str(home)}


def copy_of_repository(dest: Path) -> Path:
    """The files a clone of this checkout has (tracked or new, not ignored), copied."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:
        message = f"not a git checkout: {listed.stderr.decode().strip()}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    for name in listed.stdout.decode().split("\0"):
        source = ROOT / name
        if name and source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def port_8080_or_skip() -> None:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", 8080))
        except OSError:
            message = "port 8080, the README's, is taken on this machine"
            if os.environ.get("CI") == "true":
                pytest.fail(message)
            pytest.skip(message)


@contextlib.contextmanager
def shell(
    script: str, cwd: Path, env: dict[str, str], out: Path
) -> Iterator[subprocess.Popen[str]]:
    """``bash -c script`` in a session of its own, its output in ``out``; in the end its
    process group gets Ctrl-C's SIGINT, then SIGKILL, whatever the test did."""
    with open(out, "w") as sink:
        proc = subprocess.Popen(
            ["bash", "-c", script],
            cwd=cwd,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    try:
        yield proc
    finally:
        for number in (signal.SIGINT, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, number)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=60)
                break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # anything the shell left in its group


def run_in_shell(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A pasted script, each line traced, stopping at the first that fails."""
    return subprocess.run(
        ["bash", "-c", "set -ex\n" + script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def processes_under(root: Path) -> dict[int, str]:
    """Live processes whose command line or working directory lies under ``root``."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            command = Path("/proc", entry, "cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(f"/proc/{entry}/cwd")
            state = Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and (str(root) in command or cwd.startswith(str(root))):
            found[int(entry)] = command
    return found


def kill_under(root: Path) -> dict[int, str]:
    """Kill what still runs under ``root``; what that was."""
    left = processes_under(root)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


def wait_for_text(path: Path, proc: subprocess.Popen[str], needle: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while needle not in path.read_text():
        assert proc.poll() is None, path.read_text()
        assert time.monotonic() < deadline, path.read_text()
        time.sleep(0.2)
    return path.read_text()


# --- the headline: install and run the demo, then paste what it prints ------------------


@dataclass
class DemoRun:
    clone: Path
    home: Path
    output: str
    pasted: subprocess.CompletedProcess[str]
    code: int
    directory: Path
    survivors: dict[int, str]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    port_8080_or_skip()
    base = tmp_path_factory.mktemp("readme")
    clone = copy_of_repository(base / "labq")
    home = base / "home"
    home.mkdir()
    out = base / "demo.out"
    directory = None
    try:
        with shell(HEADLINE, clone, fresh_env(home), out) as proc:
            text = wait_for_text(out, proc, "Press Ctrl-C to stop", INSTALL_SECONDS)
            directory = Path(text.split("Database, workspaces and logs: ", 1)[1].split()[0])
            pasted = run_in_shell("\n".join(printed_commands(text)), base, fresh_env(home))
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in its terminal
            code = proc.wait(timeout=120)
            survivors = processes_under(directory)
    finally:
        kill_under(clone)  # its supervisors run the copy's .venv/bin/python, even unannounced
        if directory is not None:
            kill_under(directory)  # and their tasks work in its directory
    return DemoRun(clone, home, out.read_text(), pasted, code, directory, survivors)


def printed_commands(output: str) -> list[str]:
    """The indented lines after "Try, in another shell", as a person would paste them."""
    lines = output.split("Try, in another shell", 1)[1].splitlines()[2:]
    commands = []
    for line in lines:
        if not line.startswith("  "):
            break
        commands.append(line.strip())
    return commands


def test_the_headline_installs_and_the_demos_printed_commands_work(demo_run):
    pasted = demo_run.pasted
    assert pasted.returncode == 0, pasted.stderr
    assert "hello from demo-" in pasted.stdout  # `labq job logs 1 hello`: the task's output
    assert "job 4 completed: pass" in pasted.stdout  # the sample job submitted again
    assert f"{SERVER_URL}/ui/" in demo_run.output


def test_the_headline_demo_stops_on_ctrl_c_and_leaves_nothing(demo_run):
    assert demo_run.code == 0, demo_run.output
    assert "Traceback" not in demo_run.output
    assert demo_run.survivors == {}, demo_run.output
    assert not demo_run.directory.exists(), demo_run.output


# --- the README's own server and client --------------------------------------------------


def test_the_command_line_section_and_the_five_verbs_as_printed(demo_run, tmp_path):
    port_8080_or_skip()
    home = tmp_path / "home"
    home.mkdir()
    env = fresh_env(home)
    try:
        with shell(block("server"), demo_run.clone, env, tmp_path / "server.out") as server:
            wait_until_answers(SERVER_URL, server, tmp_path / "server.out")
            client = run_in_shell(block("client") + "\n" + block("verbs"), demo_run.clone, env)
    finally:
        (demo_run.clone / "init.txt").unlink(missing_ok=True)
        left = kill_under(home) | kill_under(demo_run.clone)
    assert client.returncode == 0, client.stderr
    out = client.stdout
    assert "runs tasks on the labq server's host: local backend" in out  # not on s1.lab1
    assert "job 1 completed: pass" in out
    assert "hello from s1.lab1 in lab lab1" in out  # `labq job logs 1 hello`
    assert "job 2 completed: pass" in out  # the clone
    assert "no job cancelled" in out
    assert left == {}


def wait_until_answers(url: str, proc: subprocess.Popen[str], log: Path) -> None:
    deadline = time.monotonic() + 120
    with httpx.Client(timeout=2) as client:  # one for every try (see wait_until_up)
        while True:
            with contextlib.suppress(httpx.TransportError):
                if client.get(f"{url}/api/v1/health").status_code == 200:
                    return
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)


# --- "Using it" and the simulator ---------------------------------------------------------


def test_the_using_it_lines_as_printed(demo_run, tmp_path):
    lines = block("using").splitlines()
    (pg_line,) = [line for line in lines if "postgresql://" in line]
    pg_url = make_url(pg_line.split("--db ", 1)[1].split()[0])
    created = not _pg_database_exists(pg_url)
    try:
        done = run_in_shell(activate() + "\n" + block("using"), demo_run.clone, env_in(tmp_path))
        assert done.returncode == 0, done.stderr
        assert '"whiteboard": "hello from the README"' in done.stdout
        assert "database ready at postgresql://" in done.stdout
        assert _pg_database_exists(pg_url)
    finally:
        if created:
            _drop(pg_url)


def test_the_simulation_lines_as_printed(demo_run, tmp_path):
    done = run_in_shell(activate() + "\n" + block("sim"), demo_run.clone, env_in(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "beaker-batch" in done.stdout
    # the trace's comparison, its plots where it says it wrote them
    assert "teuthology-workers" in done.stdout
    assert "plots written to plots/" in done.stderr
    assert (demo_run.clone / "plots" / "gantt-labq.png").is_file()


def activate() -> str:
    """The README's line that puts labq on PATH, as it prints it."""
    (line,) = {line for line in block("client").splitlines() if "activate" in line}
    return line


def env_in(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return fresh_env(home)


def _maintenance(url: URL) -> Engine:
    return create_engine(
        url.set(drivername="postgresql+psycopg", database="postgres"),
        isolation_level="AUTOCOMMIT",
    )


def _pg_database_exists(url: URL) -> bool:
    engine = _maintenance(url)
    try:
        with engine.connect() as conn:
            query = text("SELECT 1 FROM pg_database WHERE datname = :n")
            return conn.execute(query, {"n": url.database}).first() is not None
    except OperationalError as exc:
        message = f"no PostgreSQL where the README says, {url.host}:{url.port}: {exc.orig}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    finally:
        engine.dispose()


def _drop(url: URL) -> None:
    engine = _maintenance(url)
    try:
        with engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{url.database}"'))
    finally:
        engine.dispose()
