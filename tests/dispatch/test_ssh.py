"""The ssh backend against a real sshd on 127.0.0.1 (needs the openssh-server package)."""

import getpass
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from labq.dispatch.backends.ssh import SshBackend, SshError, SshOptions
from labq.dispatch.plan import RecipePlan, SetPlan, SystemInfo, Workspace
from labq.dispatch.runner import run_set
from labq.domain.states import RecipeState, Result

from .conftest import git_out, task

SSHD = Path("/usr/sbin/sshd")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _keygen(path):
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return path


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """A throwaway sshd on 127.0.0.1: host key, client key and known_hosts of its own."""
    if not SSHD.exists() or shutil.which("ssh-keygen") is None:
        pytest.skip("sshd is not installed (apt-get install openssh-server)")
    tmp = tmp_path_factory.mktemp("sshd")
    host_key = _keygen(tmp / "host_key")
    client_key = _keygen(tmp / "client_key")
    (tmp / "authorized_keys").write_text(Path(f"{client_key}.pub").read_text())
    port = _free_port()
    host_pub = " ".join(Path(f"{host_key}.pub").read_text().split()[:2])
    (tmp / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub}\n")
    config = tmp / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\n"
        f"PidFile {tmp / 'sshd.pid'}\nAuthorizedKeysFile {tmp / 'authorized_keys'}\n"
        "UsePAM no\nStrictModes no\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
        "PermitRootLogin prohibit-password\nSubsystem sftp internal-sftp\nLogLevel ERROR\n"
    )
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation directory
    errors = tmp / "sshd.err"
    with errors.open("wb") as err:
        proc = subprocess.Popen(
            [str(SSHD), "-f", str(config), "-D", "-e"], stdout=subprocess.DEVNULL, stderr=err
        )
    deadline = time.monotonic() + 10
    while True:
        if proc.poll() is not None:
            pytest.skip(f"sshd cannot run here: {errors.read_text().strip()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                pytest.skip("sshd did not start listening within 10 s")
            time.sleep(0.05)
    yield {"port": port, "key": str(client_key), "known_hosts": str(tmp / "known_hosts")}
    proc.terminate()
    proc.wait(5)


@pytest.fixture
def backend(sshd, tmp_path):
    options = SshOptions(
        user=getpass.getuser(),
        port=sshd["port"],
        identity_file=sshd["key"],
        known_hosts=sshd["known_hosts"],
        workspace=str(tmp_path / "remote" / "ws"),
        boot_timeout=1,
    )
    return SshBackend(options, grace=0.5)


HOST = SystemInfo(fqdn="box1.test", lab="lab1", address="127.0.0.1")


def test_a_set_runs_over_ssh_with_its_environment_logs_and_pinned_tasks(
    backend, tmp_path, reporter, task_repo
):
    commit = git_out("rev-parse", "HEAD", cwd=task_repo)
    token = "ssh-token-51b2c9"
    tasks = (
        task(1, 'echo "on $LABQ_FQDN as $LABQ_ROLE, peers $SERVERS"; echo out-of-band >&2'),
        task(2, 'echo "$LABQ_TOKEN" > "$LABQ_LOG_DIR/remote.log"; echo "pwd=$(pwd)"; exit 77'),
        task(3, None, name="install", params={"PACKAGE": 'it\'s "quoted" $x'}),
        task(4, None, name="missing"),
    )
    plan = SetPlan(
        id=9,
        job_id=1,
        recipes=(RecipePlan(id=1, role="servers", system=HOST, tasks=tasks),),
        ref_repo=task_repo.as_uri(),
        ref_commit=commit,
        env={"LABQ_TOKEN": token},
    )
    data = tmp_path / "data"
    outcome = run_set(
        plan, defaultdict(lambda: backend), data_dir=data, reporter=reporter, heartbeat_every=1
    )

    recipe = outcome.recipe(1)
    assert recipe.state is RecipeState.COMPLETED, recipe.reason
    assert [t.result for t in recipe.tasks] == [
        Result.PASS,
        Result.WARN,
        Result.PASS,
        Result.WARN,
    ]
    logs = data / "logs" / "set-9" / "box1.test"
    first = (logs / "task-1-t1.log").read_text()
    assert "on box1.test as servers, peers box1.test" in first
    assert "out-of-band" in first
    ws = tmp_path / "remote" / "ws"
    assert f"pwd={ws}" in (logs / "task-2-t2.log").read_text()
    installed = (ws / "installed.txt").read_text()
    assert installed == f'ref={commit} pkg=it\'s "quoted" $x\n'
    assert (logs / "collected" / "remote.log").read_text() == "[secret]\n"
    assert recipe.tasks[3].message == "no command and no tasks/missing/run in the workspace"
    for path in logs.rglob("*"):
        if path.is_file():
            assert token not in path.read_text()


def test_an_ssh_task_timeout_kills_its_process_group(backend, tmp_path, reporter):
    pids = tmp_path / "pids"
    plan = SetPlan(
        id=10,
        job_id=1,
        recipes=(
            RecipePlan(
                id=1,
                system=HOST,
                tasks=(task(1, f"sh -c 'sleep 100 & echo $! > {pids}; sleep 100'", timeout=1),),
            ),
        ),
    )
    started = time.monotonic()
    outcome = run_set(
        plan,
        defaultdict(lambda: backend),
        data_dir=tmp_path / "d",
        reporter=reporter,
        heartbeat_every=1,
    )
    assert time.monotonic() - started < 10
    recipe = outcome.recipe(1)
    assert recipe.state is RecipeState.ABORTED
    assert recipe.reason == "task 1 (t1) exceeded its timeout of 1 s"
    assert recipe.cleaned_up
    assert not (tmp_path / "remote" / "ws").exists()
    from labq.dispatch.procs import process_alive

    deadline = time.monotonic() + 3
    while process_alive(int(pids.read_text())):  # init may take a moment to reap it
        assert time.monotonic() < deadline, "grandchild still running"
        time.sleep(0.05)


def test_an_unknown_host_key_is_refused(sshd, tmp_path):
    (tmp_path / "empty_known_hosts").write_text("")
    options = SshOptions(
        user=getpass.getuser(),
        port=sshd["port"],
        identity_file=sshd["key"],
        known_hosts=str(tmp_path / "empty_known_hosts"),
        workspace=str(tmp_path / "ws"),
        boot_timeout=1,
    )
    with pytest.raises(SshError, match="host key not verified"):
        SshBackend(options).provision(
            HOST, Workspace(tmp_path / "logs"), cancel_event=threading.Event()
        )
    assert not (tmp_path / "ws").exists()


@pytest.mark.parametrize("workspace", ["/", "", ".", "..", "/home", "a/../..", "~/x"])
def test_workspaces_that_would_wipe_too_much_are_refused(workspace):
    with pytest.raises(SshError, match="not a safe directory"):
        SshOptions(workspace=workspace)


def test_a_missing_known_hosts_file_is_an_error_not_an_open_door(tmp_path):
    options = SshOptions(known_hosts=str(tmp_path / "nope"), workspace="ws", boot_timeout=1)
    with pytest.raises(SshError, match=r"known_hosts file .* does not exist"):
        SshBackend(options).cleanup(HOST, log_dir=tmp_path)


DRIVER = """
import sys, threading
from pathlib import Path
from labq.dispatch.backends.ssh import SshBackend, SshOptions
from labq.dispatch.plan import SystemInfo
options = SshOptions(user=sys.argv[1], port=int(sys.argv[2]), identity_file=sys.argv[3],
                     known_hosts=sys.argv[4], workspace=sys.argv[5], boot_timeout=1)
backend = SshBackend(options, grace=0.5)
host = SystemInfo(fqdn="box1.test", lab="lab1", address="127.0.0.1")
Path(sys.argv[5]).mkdir(parents=True, exist_ok=True)
(Path(sys.argv[5]) / ".labq").mkdir(exist_ok=True)
backend.run(host, sys.argv[6], env={"A": "multi\\nline 'value'"}, cwd=None, timeout=None,
            log_path=Path(sys.argv[7]), cancel_event=threading.Event())
"""


def test_a_remote_task_dies_with_the_supervisor_that_ran_it(sshd, tmp_path):
    """The supervisor is SIGKILLed mid-task: its connection closes, and so must the task."""
    pids = tmp_path / "pids"
    command = f"sh -c 'sleep 100 & echo $! > {pids}; setsid sleep 100 & wait'; echo \"$A\""
    driver = subprocess.Popen(
        [
            sys.executable,
            "-c",
            DRIVER,
            getpass.getuser(),
            str(sshd["port"]),
            sshd["key"],
            sshd["known_hosts"],
            str(tmp_path / "remote" / "ws"),
            command,
            str(tmp_path / "task.log"),
        ]
    )
    from labq.dispatch.procs import process_alive

    deadline = time.monotonic() + 20
    while not (pids.exists() and pids.read_text().strip()):
        assert driver.poll() is None, "the driver ended early"
        assert time.monotonic() < deadline, "the task did not start"
        time.sleep(0.05)
    sleeper = int(pids.read_text())
    assert process_alive(sleeper)
    driver.kill()
    driver.wait()
    deadline = time.monotonic() + 10
    while process_alive(sleeper):
        assert time.monotonic() < deadline, "the task outlived its supervisor"
        time.sleep(0.05)
