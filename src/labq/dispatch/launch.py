"""Starting a supervisor process: the in-server dispatcher's and a lab agent's alike.

A supervisor is forked by a fork server (:class:`Forker` keeps one, and starts
another when it went), or, when there is none to be had, spawned as a program
of its own (:func:`spawn`) and handed its secrets down its standard input
(:func:`send_secrets`) — never in its environment or on its command line, where
a task could read them. Either way it gets only the environment a process needs
(:func:`passed_on_environment`).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from labq.dispatch import containment
from labq.dispatch.containment import PASSED_ON
from labq.dispatch.forks import ForkedExit, ForkServer, ForkServerError

_log = logging.getLogger(__name__)


def passed_on_environment() -> dict[str, str]:
    """The few variables of ours a supervisor (or its fork server) is given."""
    return {k: os.environ[k] for k in PASSED_ON if k in os.environ}


class Forker:
    """Forks supervisors by a fork server of its own, started again if it went.

    ``forking`` turns False for good when a fork server cannot be started, or a
    new one fails its first fork: it will not work next time either, and every
    supervisor is spawned from then on.
    """

    def __init__(
        self,
        python: str,
        *,
        env: Mapping[str, str],
        cwd: Path,
        log: Path,
        forking: bool = True,
        preload: Sequence[str] = (),
    ) -> None:
        self.python = python
        self.preload = tuple(preload)
        self.env = dict(env)
        self.cwd = cwd
        self.log = log
        self.forking = forking
        self._forks: ForkServer | None = None

    def warm(self) -> None:
        """Start the fork server now, so its imports are done before the first set comes."""
        self._server()

    def fork(self, request: Mapping[str, object]) -> tuple[int, ForkedExit] | None:
        """A supervisor forked for ``request``: its pid, and how it will end (set later,
        from another thread). None when there is no fork server to be had: spawn it."""
        while (forks := self._server()) is not None:
            exit_ = ForkedExit()
            try:
                return forks.fork(request, exit_), exit_
            except ForkServerError as exc:
                _log.warning("fork server: %s", exc)
                if not forks.forked:  # a new one failed: it will not work next time either
                    _log.warning("the fork server does not work: spawning supervisors")
                    self.forking = False
                # one that worked before has died: the next turn starts another
        return None

    def close(self) -> None:
        """Let the fork server go; the supervisors it forked run on."""
        forks, self._forks = self._forks, None
        if forks is not None:
            forks.close()

    def _server(self) -> ForkServer | None:
        if not self.forking:
            return None
        if self._forks is None or not self._forks.alive:
            try:
                self.log.parent.mkdir(parents=True, exist_ok=True)
                self._forks = ForkServer(
                    self.python, env=self.env, cwd=self.cwd, log=self.log, preload=self.preload
                )
            except OSError as exc:
                _log.warning("cannot start a fork server (spawning supervisors): %s", exc)
                self.forking = False
                return None
        return self._forks


def spawn(
    command: list[str],
    *,
    mode: containment.Mode,
    log: Path,
    env: Mapping[str, str],
    cwd: Path,
) -> subprocess.Popen[bytes]:
    """Start ``command`` contained as ``mode`` says, its output appended to ``log``, its
    standard input a pipe for :func:`send_secrets`."""
    with log.open("ab") as out:
        return subprocess.Popen(
            containment.wrap(command, mode),
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,  # its own session: a Ctrl-C or a stop of its starter spares it
            close_fds=True,
        )


def send_secrets(proc: subprocess.Popen[bytes], secrets: Mapping[str, object]) -> None:
    """Hand a spawned supervisor its secrets, one JSON line down its standard input, which
    is then closed; one that died first finds out nothing (its exit is seen as any other)."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(json.dumps(secrets).encode() + b"\n")
        proc.stdin.close()
    except OSError:
        pass
