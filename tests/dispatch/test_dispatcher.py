"""The in-server dispatcher: starting, stopping and adopting real supervisor processes."""

from __future__ import annotations

import os
import queue
import signal
from pathlib import Path

import pytest

from labq.dispatch.dispatcher import Dispatcher, is_supervisor
from labq.domain.states import RecipeState

from .test_supervisor import Lab, lab, sqlite_template, task_running, wait_for

__all__ = ["lab", "sqlite_template"]  # fixtures shared with the supervisor's tests


class Finished:
    """Collects ``on_finished`` calls."""

    def __init__(self) -> None:
        self.calls: queue.Queue[tuple[int, int | None]] = queue.Queue()

    def __call__(self, set_id: int, code: int | None) -> None:
        self.calls.put((set_id, code))

    def next(self, timeout: float = 20) -> tuple[int, int | None]:
        return self.calls.get(timeout=timeout)


def dispatcher(lab: Lab, finished: Finished, **kw: float) -> Dispatcher:
    return Dispatcher(lab.url, lab.settings, finished, poll_every=0.1, **kw)


def supervisor_pid(lab: Lab, set_id: int) -> int:
    def recorded() -> int | None:
        with lab.read() as repo:
            return repo.get_recipe_set(set_id).supervisor_pid

    pid: int = wait_for(recorded, what="the supervisor to record itself")
    return pid


def states(lab: Lab, set_id: int) -> list[RecipeState]:
    with lab.read() as repo:
        return [r.state for r in repo.get_recipe_set(set_id).recipes]


def test_start_runs_the_set_and_reports_its_exit(lab: Lab) -> None:
    set_id = lab.started_set({"tasks": [{"name": "t", "run": "echo hi > hi.txt"}]})
    finished = Finished()
    d = dispatcher(lab, finished)
    pid = d.start(set_id)
    assert d.running() == [set_id]
    with pytest.raises(RuntimeError, match="has a supervisor already"):
        d.start(set_id)
    assert finished.next() == (set_id, 0)
    assert d.running() == []
    assert states(lab, set_id) == [RecipeState.COMPLETED]
    with lab.read() as repo:
        assert repo.get_recipe_set(set_id).supervisor_pid == pid
    output = lab.logs(set_id) / "supervisor-output.log"
    assert "ended completed" in output.read_text()
    settings_file = lab.data_dir / "supervisors" / f"set-{set_id}.json"
    assert oct(settings_file.stat().st_mode & 0o777) == "0o600"
    assert "database" not in settings_file.read_text()
    d.shutdown()


def test_stop_ends_a_running_set_as_cancelled(lab: Lab) -> None:
    set_id = lab.started_set({"tasks": [{"name": "long", "run": "sleep 30"}]})
    finished = Finished()
    d = dispatcher(lab, finished)
    d.start(set_id)
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
    first.start(set_id)
    pid = supervisor_pid(lab, set_id)
    wait_for(lambda: task_running(lab, set_id), what="the task to run")
    first.shutdown()  # the server goes away; its supervisor does not

    second = dispatcher(lab, after)
    assert is_supervisor(pid, set_id)
    assert not is_supervisor(pid, set_id + 1)
    assert second.adopt({set_id: pid}) == [set_id]
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
    assert d.adopt([(41, dead), (42, os.getpid())]) == []
    assert {finished.next(1), finished.next(1)} == {(41, None), (42, None)}
    assert d.running() == []
    d.shutdown()


def test_stop_kills_a_supervisor_that_ignores_sigterm(lab: Lab, tmp_path: Path) -> None:
    pid_file = tmp_path / "task.pid"
    set_id = lab.started_set(
        {"tasks": [{"name": "long", "run": f"echo $$ > {pid_file}; sleep 30"}]}
    )
    finished = Finished()
    d = dispatcher(lab, finished, grace=0.5)
    d.start(set_id)
    pid = supervisor_pid(lab, set_id)
    try:
        wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), what="the task")
        os.kill(pid, signal.SIGSTOP)  # it cannot act on SIGTERM now
        assert d.stop(set_id)
        assert finished.next() == (set_id, -signal.SIGKILL)
    finally:
        # the task has a process group of its own: the supervisor's death did not end it
        os.killpg(int(pid_file.read_text()), signal.SIGKILL)
        d.shutdown()
    assert states(lab, set_id) == [RecipeState.RUNNING]  # the server aborts it


def _dead_pid() -> int:
    """A pid that has just exited (and been reaped)."""
    pid = os.spawnlp(os.P_NOWAIT, "true", "true")
    os.waitpid(pid, 0)
    return pid
