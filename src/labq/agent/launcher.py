"""Starting an agent's supervisors, and knowing them again after the agent restarted.

A supervisor is ``python -m labq.agent.supervisor --set N --dir SETDIR``,
contained as :mod:`labq.dispatch.containment` says (its own session, or a PID
namespace of its own), with only the environment a process needs and its
secrets on standard input. Its pid goes to ``SETDIR/pid`` *before* it is given
its secrets: a supervisor runs nothing until it has them, so one whose agent
died before recording it finds its standard input closed and exits. A
restarted agent knows a recorded pid for the set's supervisor by its command
line (:func:`~labq.dispatch.containment.runs_set`), never by the pid alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from labq.agent.spool import SetDir
from labq.dispatch import containment
from labq.dispatch.logs import SUPERVISOR_OUTPUT

MODULE: Final = "labq.agent.supervisor"

__all__ = ["MODULE", "SUPERVISOR_OUTPUT", "Supervisor", "launch"]


class Supervisor:
    """A set's supervisor process: started by this agent (``proc``) or adopted (``None``)."""

    def __init__(
        self, spool: SetDir, pid: int | None, proc: subprocess.Popen[bytes] | None
    ) -> None:
        self.spool = spool
        self.pid = pid
        self.proc = proc

    @staticmethod
    def adopt(spool: SetDir) -> Supervisor:
        """The supervisor recorded in ``spool``, whatever became of it."""
        return Supervisor(spool, spool.read_pid(), None)

    def alive(self) -> bool:
        """Whether it still runs (a zombie, or a pid now another program's, does not)."""
        if self.proc is not None:
            return self.proc.poll() is None
        return self.pid is not None and containment.runs_set(self.pid, MODULE, self.spool.set_id)

    def code(self) -> int | None:
        """Its exit status, once it exited: what it wrote, else what its parent saw (None
        when neither is known: killed, and not our child)."""
        written = self.spool.read_exit()
        if written is not None:
            return written
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
    env = {k: os.environ[k] for k in containment.PASSED_ON if k in os.environ}
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
