"""Supervisors forked by the dispatcher's fork server: what they are, and what happens when
the fork server goes."""

from __future__ import annotations

import os
import signal
import stat
import sys
from pathlib import Path

import pytest

from labq.dispatch import containment
from labq.dispatch.dispatcher import Dispatcher, is_supervisor
from labq.dispatch.procs import process_alive
from labq.domain.states import RecipeState

from .test_dispatcher import MODES, Finished, dispatcher, states, supervisor_pid
from .test_supervisor import Lab, lab, sqlite_template, task_running, wait_for

__all__ = ["lab", "sqlite_template"]


def parent(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rfind(")") + 2 :].split()[1])


def session(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rfind(")") + 2 :].split()[3])


def waiting_set(lab: Lab, gate: Path) -> int:
    return lab.started_set(
        {"tasks": [{"name": "wait", "run": f"while [ ! -e {gate} ]; do sleep 0.05; done"}]}
    )


@pytest.mark.parametrize("mode", MODES)
def test_a_supervisor_is_forked_by_the_fork_server_into_a_session_of_its_own(
    lab: Lab, tmp_path: Path, mode: containment.Mode
) -> None:
    gate = tmp_path / "go"
    set_id = waiting_set(lab, gate)
    finished = Finished()
    d = dispatcher(lab, finished, mode)
    pid = d.start(set_id, lab.claim(set_id))
    try:
        wait_for(lambda: task_running(lab, set_id), what="the task to run")
        forks = parent(pid)
        assert forks != os.getpid()  # not our child: the fork server's
        assert b"labq.dispatch.forkserver" in Path(f"/proc/{forks}/cmdline").read_bytes()
        assert session(pid) == pid  # signalled as a group, as a spawned one is
        assert is_supervisor(pid, set_id)
        assert not is_supervisor(forks, set_id)
    finally:
        gate.touch()
    assert finished.next() == (set_id, 0)
    assert states(lab, set_id) == [RecipeState.COMPLETED]
    d.shutdown()
    wait_for(lambda: not process_alive(forks), what="the fork server to go with its dispatcher")


def fork_servers_of(pid: int) -> list[int]:
    """The fork servers among ``pid``'s children."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ours = parent(int(entry.name)) == pid
                command = (entry / "cmdline").read_bytes()
            except (FileNotFoundError, ProcessLookupError):
                continue  # it ended meanwhile
            if ours and b"labq.dispatch.forkserver" in command:
                found.append(int(entry.name))
    return found


def test_the_fork_server_starts_with_the_first_set(lab: Lab, tmp_path: Path) -> None:
    """A dispatcher that has started no set has no fork server: a server with no work never
    pays its imports (a second of CPU at every start)."""
    gate = tmp_path / "go"
    set_id = waiting_set(lab, gate)
    finished = Finished()
    d = dispatcher(lab, finished, "group")
    try:
        assert fork_servers_of(os.getpid()) == []
        pid = d.start(set_id, lab.claim(set_id))
        assert fork_servers_of(os.getpid()) == [parent(pid)]  # now
    finally:
        gate.touch()
    assert finished.next() == (set_id, 0)
    d.shutdown()


def test_the_fork_server_goes_with_its_dispatcher_and_its_supervisors_stay(
    lab: Lab, tmp_path: Path
) -> None:
    gate = tmp_path / "go"
    set_id = waiting_set(lab, gate)
    claim = lab.claim(set_id)
    before, after = Finished(), Finished()
    first = dispatcher(lab, before)
    pid = first.start(set_id, claim)
    wait_for(lambda: task_running(lab, set_id), what="the task to run")
    forks = parent(pid)
    first.shutdown()
    wait_for(lambda: not process_alive(forks), what="the fork server to exit")
    assert is_supervisor(pid, set_id)  # an orphan now, still running its set

    second = dispatcher(lab, after)
    assert second.adopt([(set_id, pid, claim)]) == [set_id]
    gate.touch()
    assert after.next() == (set_id, None)
    assert states(lab, set_id) == [RecipeState.COMPLETED]
    assert before.calls.empty()
    second.shutdown()


def test_a_set_outlives_its_fork_server_and_the_next_set_gets_a_new_one(
    lab: Lab, tmp_path: Path
) -> None:
    gate = tmp_path / "go"
    first_set = waiting_set(lab, gate)
    finished = Finished()
    d = dispatcher(lab, finished)
    pid = d.start(first_set, lab.claim(first_set))
    wait_for(lambda: task_running(lab, first_set), what="the task to run")
    old = parent(pid)
    os.kill(old, signal.SIGKILL)
    wait_for(lambda: parent(pid) != old, what="the supervisor to be orphaned")
    assert d.running() == [first_set]  # still watched, as an adopted one is
    gate.touch()
    assert finished.next() == (first_set, None)  # its exit status died with the fork server
    assert states(lab, first_set) == [RecipeState.COMPLETED]

    second_set = lab.started_set({"tasks": [{"name": "t", "run": "true"}]})
    pid = d.start(second_set, lab.claim(second_set))
    assert finished.next() == (second_set, 0)
    assert states(lab, second_set) == [RecipeState.COMPLETED]
    d.shutdown()


def test_without_a_working_fork_server_supervisors_are_spawned(lab: Lab, tmp_path: Path) -> None:
    # a Python that runs everything but the fork server, which dies at once
    python = tmp_path / "python"
    python.write_text(
        "#!/bin/sh\n"
        'case "$*" in *labq.dispatch.forkserver*) exit 1;; esac\n'
        f'exec {sys.executable} "$@"\n'
    )
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    gate = tmp_path / "go"
    set_id = waiting_set(lab, gate)
    finished = Finished()
    d = Dispatcher(lab.url, lab.settings, finished, mode="group", python=str(python))
    pid = d.start(set_id, lab.claim(set_id))
    try:
        wait_for(lambda: task_running(lab, set_id), what="the task to run")
        assert supervisor_pid(lab, set_id) == pid
        assert b"--secrets-on-stdin" in Path(f"/proc/{pid}/cmdline").read_bytes()  # spawned
    finally:
        gate.touch()
    assert finished.next() == (set_id, 0)
    assert states(lab, set_id) == [RecipeState.COMPLETED]
    assert not d.forking  # a fork server that never forked is not tried again
    d.shutdown()
