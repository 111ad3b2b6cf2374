"""Starting an agent's supervisors, and knowing them again after the agent restarted.

A supervisor is forked by a fork server (:mod:`labq.dispatch.forkserver`, started
once, its imports done once: a claimed set's tasks start well within a second),
or, when there is none to be had, spawned as ``python -m labq.agent.supervisor
--set N --dir SETDIR``; either way contained as :mod:`labq.dispatch.containment`
says (its own session, or a PID namespace of its own), with only the
environment a process needs. Its secrets go down the fork server's socket, or
the spawned one's standard input; the plan is in ``SETDIR/claim.json``.

Its pid is in ``SETDIR/pid`` before it runs anything: a forked one writes it
itself, first; a spawned one's is written before it is given its secrets (it
waits for them, so one whose agent died first finds its standard input closed
and exits). A restarted agent knows a recorded pid for the set's supervisor by
its command line (:func:`~labq.dispatch.containment.runs_set`), never by the
pid alone.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from labq.agent.spool import SetDir
from labq.dispatch import containment
from labq.dispatch.forks import ForkedExit
from labq.dispatch.forkwire import AGENT_PRELOAD
from labq.dispatch.launch import Forker, passed_on_environment, send_secrets, spawn
from labq.dispatch.logs import SUPERVISOR_OUTPUT

MODULE: Final = "labq.agent.supervisor"

FORK_SERVER_LOG: Final = "fork-server.log"

__all__ = ["MODULE", "SUPERVISOR_OUTPUT", "ForkedExit", "Launcher", "Supervisor", "launch"]


class Supervisor:
    """A set's supervisor process: spawned by this agent (``proc``), forked by its fork
    server (``forked``), or adopted (neither)."""

    def __init__(
        self,
        spool: SetDir,
        pid: int | None,
        proc: subprocess.Popen[bytes] | None,
        forked: ForkedExit | None = None,
    ) -> None:
        self.spool = spool
        self.pid = pid
        self.proc = proc
        self.forked = forked

    @staticmethod
    def adopt(spool: SetDir) -> Supervisor:
        """The supervisor recorded in ``spool``, whatever became of it."""
        return Supervisor(spool, spool.read_pid(), None)

    def alive(self) -> bool:
        """Whether it still runs (a zombie, or a pid now another program's, does not)."""
        if self.proc is not None:
            return self.proc.poll() is None
        if self.forked is not None and not (self.forked.seen.is_set() and self.forked.lost):
            # by the fork server's word: a child not yet titled is not known by its command line
            return not self.forked.seen.is_set()
        return self.pid is not None and containment.runs_set(self.pid, MODULE, self.spool.set_id)

    def code(self) -> int | None:
        """Its exit status, once it exited: what it wrote, else what its parent saw (None
        when neither is known: killed, and not our child)."""
        written = self.spool.read_exit()
        if written is not None:
            return written
        if self.forked is not None:
            return self.forked.code
        return None if self.proc is None else self.proc.returncode


def launch(
    spool: SetDir,
    secrets: Mapping[str, object],
    *,
    log: Path,
    cwd: Path,
    mode: containment.Mode,
    python: str = sys.executable,
) -> Supervisor:
    """Start the supervisor of ``spool``'s set and hand it ``secrets``."""
    command = [python, "-m", MODULE, "--set", str(spool.set_id), "--dir", str(spool.path)]
    log.parent.mkdir(parents=True, exist_ok=True)
    proc = spawn(command, mode=mode, log=log, env=passed_on_environment(), cwd=cwd)
    spool.write_pid(proc.pid)  # before its secrets: it waits for them, so it has not run yet
    send_secrets(proc, secrets)
    return Supervisor(spool, proc.pid, proc)


class Launcher:
    """Starts supervisors by a fork server of its own (started again if it went), else by
    spawning them."""

    def __init__(self, data_dir: Path, mode: containment.Mode, *, forking: bool = True) -> None:
        self.data_dir = data_dir
        self.mode = mode
        self._forker = Forker(
            sys.executable,
            env=passed_on_environment(),
            cwd=data_dir,
            log=data_dir / FORK_SERVER_LOG,
            forking=forking,
            preload=AGENT_PRELOAD,
        )

    @property
    def forking(self) -> bool:
        """False once supervisors are spawned for good (no fork server to be had)."""
        return self._forker.forking

    def warm(self) -> None:
        """Start the fork server now, so its imports are done before the first set comes."""
        self._forker.warm()

    def start(self, spool: SetDir, secrets: Mapping[str, object], *, log: Path) -> Supervisor:
        """Start the supervisor of ``spool``'s set (its claim already recorded there)."""
        log.parent.mkdir(parents=True, exist_ok=True)
        request = {
            "set": spool.set_id,
            "module": MODULE,
            "dir": str(spool.path),
            "config": str(spool.settings_file),
            "data_dir": str(self.data_dir),
            "cwd": str(self.data_dir),
            "log": str(log),
            "env": passed_on_environment(),
            "mode": self.mode,
            # the plan can outgrow a packet: the supervisor reads it from claim.json
            "secrets": {k: v for k, v in secrets.items() if k not in ("plan", "env")},
        }
        forked = self._forker.fork(request)
        if forked is None:
            return launch(spool, secrets, log=log, cwd=self.data_dir, mode=self.mode)
        pid, exit_ = forked
        spool.write_pid(pid)
        return Supervisor(spool, pid, None, exit_)

    def close(self) -> None:
        """Let the fork server go; the supervisors it forked run on."""
        self._forker.close()
