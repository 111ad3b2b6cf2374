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

import json
import logging
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from labq.agent.spool import SetDir
from labq.dispatch import containment
from labq.dispatch.forks import ForkedExit, ForkServer, ForkServerError
from labq.dispatch.logs import SUPERVISOR_OUTPUT

MODULE: Final = "labq.agent.supervisor"
_log = logging.getLogger(__name__)

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
    env = _environment()
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            containment.wrap(command, mode),
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,  # its own session: a Ctrl-C or a stop of the agent spares it
            close_fds=True,
        )
    spool.write_pid(proc.pid)
    assert proc.stdin is not None
    try:
        proc.stdin.write(json.dumps(secrets).encode() + b"\n")
        proc.stdin.close()
    except OSError:  # it died before reading: its exit is seen as any other
        pass
    return Supervisor(spool, proc.pid, proc)


def _environment() -> dict[str, str]:
    return {k: os.environ[k] for k in containment.PASSED_ON if k in os.environ}


class Launcher:
    """Starts supervisors by a fork server of its own (started again if it went), else by
    spawning them."""

    def __init__(self, data_dir: Path, mode: containment.Mode, *, forking: bool = True) -> None:
        self.data_dir = data_dir
        self.mode = mode
        self.forking = forking
        self._forks: ForkServer | None = None

    def warm(self) -> None:
        """Start the fork server now, so its imports are done before the first set comes."""
        self._fork_server()

    def start(self, spool: SetDir, secrets: Mapping[str, object], *, log: Path) -> Supervisor:
        """Start the supervisor of ``spool``'s set (its claim already recorded there)."""
        log.parent.mkdir(parents=True, exist_ok=True)
        while (forks := self._fork_server()) is not None:
            request = {
                "set": spool.set_id,
                "module": MODULE,
                "dir": str(spool.path),
                "config": str(spool.settings_file),
                "data_dir": str(self.data_dir),
                "cwd": str(self.data_dir),
                "log": str(log),
                "env": _environment(),
                "mode": self.mode,
                # the plan can outgrow a packet: the supervisor reads it from claim.json
                "secrets": {k: v for k, v in secrets.items() if k not in ("plan", "env")},
            }
            exit_ = ForkedExit()
            try:
                pid = forks.fork(request, exit_)
            except ForkServerError as exc:
                _log.warning("fork server: %s", exc)
                if not forks.forked:  # a new one failed: it will not work next time either
                    self.forking = False
                continue
            spool.write_pid(pid)
            return Supervisor(spool, pid, None, exit_)
        return launch(spool, secrets, log=log, cwd=self.data_dir, mode=self.mode)

    def _fork_server(self) -> ForkServer | None:
        if not self.forking:
            return None
        if self._forks is None or not self._forks.alive:
            try:
                self._forks = ForkServer(
                    sys.executable,
                    env=_environment(),
                    cwd=self.data_dir,
                    log=self.data_dir / FORK_SERVER_LOG,
                )
            except OSError as exc:
                _log.warning("cannot start a fork server (spawning supervisors): %s", exc)
                self.forking = False
                return None
        return self._forks

    def close(self) -> None:
        """Let the fork server go; the supervisors it forked run on."""
        forks, self._forks = self._forks, None
        if forks is not None:
            forks.close()
