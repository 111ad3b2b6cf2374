"""The in-server dispatcher: starting, stopping and adopting real supervisor processes."""

from __future__ import annotations

import os
import queue
import signal
from pathlib import Path

import pytest

from labq.dispatch import containment
from labq.dispatch.dispatcher import Dispatcher, is_supervisor
from labq.dispatch.procs import process_alive
from labq.domain.states import RecipeState
from labq.domain.stops import supervisor_ended

from .test_supervisor import Lab, lab, sqlite_template, task_running, wait_for

__all__ = ["lab", "sqlite_template"]  # fixtures shared with the supervisor's tests


class Finished:
    """Collects ``on_finished`` calls (the claim is checked, then left out)."""

    def __init__(self) -> None:
        self.calls: queue.Queue[tuple[int, int | None]] = queue.Queue()
        self.claims: list[str] = []

    def __call__(self, set_id: int, code: int | None, claim: str) -> None:
        self.claims.append(claim)
        self.calls.put((set_id, code))

    def next(self, timeout: float = 20) -> tuple[int, int | None]:
        return self.calls.get(timeout=timeout)


MODES = [
    "group",
    pytest.param(
        "pidns",
        marks=pytest.mark.skipif(
            containment.available_mode() != "pidns", reason="no PID namespaces here"
        ),
    ),
]


def dispatcher(
    lab: Lab, finished: Finished, mode: containment.Mode = "group", **kw: float
) -> Dispatcher:
    return Dispatcher(lab.url, lab.settings, finished, poll_every=0.1, mode=mode, **kw)


def supervisor_pid(lab: Lab, set_id: int) -> int:
    def recorded() -> int | None:
        with lab.read() as repo:
            return repo.jobs.get_recipe_set(set_id).supervisor_pid

    pid: int = wait_for(recorded, what="the supervisor to record itself")
    return pid


def states(lab: Lab, set_id: int) -> list[RecipeState]:
    with lab.read() as repo:
        return [r.state for r in repo.jobs.get_recipe_set(set_id).recipes]


@pytest.mark.parametrize("mode", MODES)
def test_start_runs_the_set_and_reports_its_exit(lab: Lab, mode: containment.Mode) -> None:
    set_id = lab.started_set({"tasks": [{"name": "t", "run": "echo hi > hi.txt"}]})
    claim = lab.claim(set_id)
    finished = Finished()
    d = dispatcher(lab, finished, mode)
    pid = d.start(set_id, claim)
    assert d.running() == [set_id]
    with pytest.raises(RuntimeError, match="has a supervisor already"):
        d.start(set_id, claim)
    assert finished.next() == (set_id, 0)
    assert finished.claims == [claim]
    assert d.running() == []
    assert states(lab, set_id) == [RecipeState.COMPLETED]
    with lab.read() as repo:
        assert repo.jobs.get_recipe_set(set_id).supervisor_pid == pid
    output = lab.logs(set_id) / "supervisor-output.log"
    assert "ended completed" in output.read_text()
    settings_file = lab.data_dir / "supervisors" / f"set-{set_id}.json"
    assert oct(settings_file.stat().st_mode & 0o777) == "0o600"
    assert "database" not in settings_file.read_text()
    d.shutdown()


@pytest.mark.parametrize("mode", MODES)
def test_a_supervisor_holds_no_secret_where_a_task_can_read_it(
    lab: Lab, mode: containment.Mode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LABQ_DB", lab.url)  # as a server started with LABQ_DB has it
    monkeypatch.setenv("LABQ_TOKEN", "lq_the_admins_own_token")
    seen = tmp_path / "seen"
    gate = tmp_path / "go"
    set_id = lab.started_set(
        {
            "tasks": [
                {
                    "name": "snoop",
                    "run": f"env > {seen}.tmp; mv {seen}.tmp {seen}.env; "
                    f"while [ ! -e {gate} ]; do sleep 0.05; done",
                }
            ]
        }
    )
    claim = lab.claim(set_id)
    finished = Finished()
    d = dispatcher(lab, finished, mode)
    pid = d.start(set_id, claim)
    try:
        wait_for(lambda: task_running(lab, set_id), what="the task to run")
        wait_for(lambda: gate.with_name("seen.env").exists(), what="the task's environment")
        supervisor = supervisor_pid(lab, set_id)
        assert supervisor == pid  # the pid it recorded is the one the dispatcher watches
        task_env = Path(f"{seen}.env").read_text()
        for secret in (lab.url, claim, "lq_the_admins_own_token"):
            assert secret not in task_env
        for process in _processes_of(pid):
            try:
                environ = Path(f"/proc/{process}/environ").read_bytes()
                cmdline = Path(f"/proc/{process}/cmdline").read_bytes()
            except (FileNotFoundError, ProcessLookupError):
                continue  # gone since it was listed (the task's loop starts a sleep at a time)
            for secret in (lab.url, claim, "lq_the_admins_own_token"):
                assert secret.encode() not in environ, f"pid {process}'s environment"
                assert secret.encode() not in cmdline, f"pid {process}'s command line"
    finally:
        gate.touch()
    assert finished.next() == (set_id, 0)
    d.shutdown()


@pytest.mark.parametrize("mode", MODES)
def test_stop_ends_a_running_set_as_cancelled(lab: Lab, mode: containment.Mode) -> None:
    set_id = lab.started_set({"tasks": [{"name": "long", "run": "sleep 30"}]})
    finished = Finished()
    d = dispatcher(lab, finished, mode)
    d.start(set_id, lab.claim(set_id))
    wait_for(lambda: task_running(lab, set_id), what="the task to run")
    assert d.stop(set_id)
    assert finished.next() == (set_id, 0)
    assert states(lab, set_id) == [RecipeState.CANCELLED]
    assert not d.stop(set_id)  # nothing left to stop
    d.shutdown()


def test_a_restarted_dispatcher_adopts_a_running_supervisor(lab: Lab, tmp_path: Path) -> None:
    gate = tmp_path / "go"
    set_id = lab.started_set(
        {"tasks": [{"name": "wait", "run": f"while [ ! -e {gate} ]; do sleep 0.05; done"}]}
    )
    before, after = Finished(), Finished()
    first = dispatcher(lab, before)
    claim = lab.claim(set_id)
    first.start(set_id, claim)
    pid = supervisor_pid(lab, set_id)
    wait_for(lambda: task_running(lab, set_id), what="the task to run")
    first.shutdown()  # the server goes away; its supervisor does not

    second = dispatcher(lab, after)
    assert is_supervisor(pid, set_id)
    assert not is_supervisor(pid, set_id + 1)
    assert second.adopt([(set_id, pid, claim)]) == [set_id]
    assert second.running() == [set_id]
    gate.touch()
    assert after.next() == (set_id, None)  # not our child: its exit status is unknown
    assert states(lab, set_id) == [RecipeState.COMPLETED]
    assert before.calls.empty()
    second.shutdown()


def test_adopting_a_dead_or_foreign_pid_reports_the_set_at_once(lab: Lab) -> None:
    finished = Finished()
    d = dispatcher(lab, finished)
    dead = _dead_pid()
    assert d.adopt([(41, dead, "a"), (42, os.getpid(), "b")]) == []
    assert {finished.next(1), finished.next(1)} == {(41, None), (42, None)}
    assert d.running() == []
    d.shutdown()


@pytest.mark.parametrize("mode", MODES)
def test_stop_kills_a_supervisor_that_ignores_sigterm_and_its_tasks_die_with_it(
    lab: Lab, tmp_path: Path, mode: containment.Mode
) -> None:
    pid_file = tmp_path / "task.pid"
    set_id = lab.started_set(
        {"tasks": [{"name": "long", "run": f"echo $$ > {pid_file}; exec sleep 30"}]}
    )
    finished = Finished()
    d = dispatcher(lab, finished, mode, grace=0.5)
    d.start(set_id, lab.claim(set_id))
    pid = supervisor_pid(lab, set_id)
    try:
        wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), what="the task")
        task = _host_pid(pid, pid_file)
        assert process_alive(task)
        _freeze(pid)  # it cannot act on SIGTERM now
        assert d.stop(set_id)
        set_and_code = finished.next()
        assert set_and_code[0] == set_id
        assert set_and_code[1] in (-signal.SIGKILL, 128 + signal.SIGKILL)
        assert not process_alive(task)  # gone before the end was reported
    finally:
        d.shutdown()
    assert states(lab, set_id) == [RecipeState.RUNNING]  # the server aborts it


@pytest.mark.parametrize("mode", MODES)
def test_a_killed_supervisor_takes_every_task_process_with_it(
    lab: Lab, tmp_path: Path, mode: containment.Mode
) -> None:
    pid_file = tmp_path / "task.pid"
    # a daemon that leaves the task's process group and session
    set_id = lab.started_set(
        {
            "tasks": [
                {
                    "name": "daemon",
                    "run": f"setsid sh -c 'echo $$ > {pid_file}; exec sleep 60' & sleep 60",
                }
            ]
        }
    )
    finished = Finished()
    d = dispatcher(lab, finished, mode)
    d.start(set_id, lab.claim(set_id))
    try:
        wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), what="the daemon")
        daemon = _host_pid(supervisor_pid(lab, set_id), pid_file)
        assert process_alive(daemon)
        os.kill(supervisor_pid(lab, set_id), signal.SIGKILL)
        assert finished.next()[0] == set_id
        assert not process_alive(daemon)  # dead before anyone heard the set ended
    finally:
        d.shutdown()


@pytest.mark.parametrize("mode", MODES)
def test_a_supervisor_killed_by_sigkill_is_reported_killed_by_it(
    lab: Lab, mode: containment.Mode
) -> None:
    """The supervisor itself, not its keeper: the keeper ends as its child did, quietly."""
    set_id = lab.started_set({"tasks": [{"name": "long", "run": "sleep 60"}]})
    finished = Finished()
    d = dispatcher(lab, finished, mode)
    pid = d.start(set_id, lab.claim(set_id))
    try:
        wait_for(lambda: task_running(lab, set_id), what="the task to run")
        os.kill(_supervisor_itself(pid), signal.SIGKILL)
        assert finished.next() == (set_id, -signal.SIGKILL)
    finally:
        d.shutdown()
    assert supervisor_ended(-signal.SIGKILL).startswith("the supervisor was killed (by SIGKILL)")
    output = (lab.logs(set_id) / "supervisor-output.log").read_text()
    assert "Traceback" not in output


def _supervisor_itself(pid: int) -> int:
    """The supervisor the dispatcher watches as ``pid`` (inside a PID namespace: its first
    child, the keeper's)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return int(children[0]) if _keeps_a_namespace(pid) and children else pid


def _freeze(pid: int) -> None:
    """SIGSTOP the supervisor itself (inside a PID namespace: its first child)."""
    os.kill(_supervisor_itself(pid), signal.SIGSTOP)


def _keeps_a_namespace(pid: int) -> bool:
    """``unshare`` before a spawned supervisor, the keeper before a forked one."""
    args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return args[0].endswith(b"unshare") or b"--keeper" in args


def _processes_of(root: int) -> list[int]:
    """``root`` and every descendant, as this host numbers them."""
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        try:
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue  # it ended while we looked: its children are re-parented, not ours
    return out


def _host_pid(root: int, pid_file: Path) -> int:
    """The pid a task wrote in ``pid_file``, as this host numbers it: inside a PID namespace
    the task sees its own numbers, so look among the supervisor's descendants."""
    wanted = int(pid_file.read_text())
    for process in _processes_of(root):
        status = Path(f"/proc/{process}/status").read_text()
        nspid = next(line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:"))
        if int(nspid[-1]) == wanted:
            return process
    raise AssertionError(f"no process {wanted} under {root}")


def _dead_pid() -> int:
    """A pid that has just exited (and been reaped)."""
    pid = os.spawnlp(os.P_NOWAIT, "true", "true")
    os.waitpid(pid, 0)
    return pid
