"""The in-server dispatcher: one supervisor process per started recipe set.

:meth:`Dispatcher.start` has its fork server (:mod:`labq.dispatch.forkserver`,
started once, its imports done once) fork a supervisor for a set and the claim
the scheduler gave it — or, when there is no fork server to be had, launches
``python -m labq.dispatch.supervisor`` — contained as
:mod:`labq.dispatch.containment` says (a PID namespace of its own where the
host allows, else its own session), and a thread waits for its exit and calls
``on_finished(set_id, returncode, claim)`` — only once everything the set ran is
gone. The supervisor records its pid and host in the database when it takes the
claim up; after a server restart :meth:`adopt` takes those pids back: a live
supervisor of that set is watched until it exits, a dead one is reported at
once. ``returncode`` is None when the exit status cannot be known (an adopted
process is not our child).

Secrets never travel in the supervisor's environment or on its command line,
where a task could read them: the database URL and the claim go down the fork
server's socket (or a pipe on a spawned supervisor's standard input), and the
effective settings (without the database) go in a file only the server's user
can read. The supervisor's environment holds only
the few variables a process needs (:data:`~labq.dispatch.containment.PASSED_ON`).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from labq.config import Settings
from labq.dispatch import containment
from labq.dispatch.forks import ForkedExit
from labq.dispatch.forkwire import SSH_PRELOAD, drivers_of
from labq.dispatch.launch import Forker, passed_on_environment, send_secrets, spawn
from labq.dispatch.logs import SUPERVISOR_OUTPUT, set_log_dir

OnFinished = Callable[[int, int | None, str], None]
MODULE: Final = "labq.dispatch.supervisor"
OUTPUT_NAME: Final = SUPERVISOR_OUTPUT
FORK_SERVER_LOG: Final = "fork-server.log"
DEFAULT_GRACE: Final = 30.0  # the supervisor kills tasks (5 s), archives and cleans up first
DEFAULT_POLL: Final = 1.0

_log = logging.getLogger(__name__)


def backends_preload(settings: Settings) -> tuple[str, ...]:
    """What the fork server imports for its supervisors' backends beyond the local one: SSH's
    library where a lab's systems or VMs are reached over SSH."""
    remote = any(lab.backend == "ssh" or lab.vms is not None for lab in settings.labs.values())
    return SSH_PRELOAD if remote else ()


def is_supervisor(pid: int, set_id: int) -> bool:
    """True when ``pid`` is alive and is a labq supervisor of ``set_id`` (by its command line).

    A zombie has an empty command line, so it counts as dead; so does a pid
    that was reused by another program.
    """
    return containment.runs_set(pid, MODULE, set_id)  # forked ones name it too (title.py)


@dataclass
class _Watched:
    set_id: int
    pid: int  # the contained process: leads its own session, so its group is the set's
    claim: str
    proc: subprocess.Popen[bytes] | None  # None: adopted, or the fork server's child
    exit: ForkedExit | None = None  # a forked one's: set when the fork server saw it end


class Dispatcher:
    """Starts, stops and adopts supervisors; see the module docstring.

    ``on_finished`` is called from a watcher thread, once per supervisor, after
    it exited; it is not called after :meth:`shutdown`.
    """

    def __init__(
        self,
        db_url: str,
        settings: Settings,
        on_finished: OnFinished,
        *,
        grace: float = DEFAULT_GRACE,
        poll_every: float = DEFAULT_POLL,
        python: str = sys.executable,
        api_url: str | None = None,
        mode: containment.Mode | None = None,
        forking: bool = True,
    ) -> None:
        self.db_url = db_url
        self.api_url = api_url
        self.settings = settings
        self.on_finished = on_finished
        self.grace = grace
        self.poll_every = poll_every
        self.python = python
        self.data_dir = settings.data_path()
        self.mode = mode or containment.available_mode()
        self._lock = threading.Lock()
        self._watched: dict[int, _Watched] = {}
        self._closed = threading.Event()
        self._forker = Forker(
            python,
            env=self._environment(),
            cwd=self.data_dir,
            log=self.data_dir / "supervisors" / FORK_SERVER_LOG,
            forking=forking,  # False: spawn every supervisor (the way before fork servers)
            preload=(*drivers_of(db_url), *backends_preload(settings)),
        )
        # started by the first set: a server that never runs one (a standby, a quiet lab)
        # never pays the fork server's imports; that first set waits a second for them

    @property
    def forking(self) -> bool:
        """False once supervisors are spawned for good (no fork server to be had)."""
        return self._forker.forking

    # -- starting ---------------------------------------------------------------------

    def start(self, set_id: int, claim: str) -> int:
        """Launch the supervisor of a started set under ``claim``; returns its pid."""
        with self._lock:
            if self._closed.is_set():
                raise RuntimeError("the dispatcher has been shut down")
            if set_id in self._watched:
                raise RuntimeError(f"recipe set {set_id} has a supervisor already")
            log_dir = set_log_dir(self.data_dir, set_id)
            log_dir.mkdir(parents=True, exist_ok=True)
            watched = self._fork(set_id, claim, log_dir) or self._launch(set_id, claim, log_dir)
            self._watched[set_id] = watched
        self._spawn(self._wait_child if watched.proc else self._wait_forked, watched)
        return watched.pid

    def _fork(self, set_id: int, claim: str, log_dir: Path) -> _Watched | None:
        """A supervisor forked by the fork server (started again if it went); None when
        there is none to be had."""
        request = {
            "set": set_id,
            "config": str(self._settings_file(set_id)),
            "data_dir": str(self.data_dir),
            "cwd": str(self.data_dir),
            "log": str(log_dir / OUTPUT_NAME),
            "env": self._environment(),
            "mode": self.mode,
            "secrets": {"database": self.db_url, "claim": claim},
        }
        forked = self._forker.fork(request)
        if forked is None:
            return None
        pid, exit_ = forked
        return _Watched(set_id, pid, claim, None, exit_)

    def _launch(self, set_id: int, claim: str, log_dir: Path) -> _Watched:
        """A supervisor spawned as a program of its own (slow: it imports everything)."""
        command = [
            self.python,
            "-m",
            MODULE,
            "--set",
            str(set_id),
            "--config",
            str(self._settings_file(set_id)),
            "--data-dir",
            str(self.data_dir),
            "--secrets-on-stdin",
        ]
        proc = spawn(
            command,
            mode=self.mode,
            log=log_dir / OUTPUT_NAME,
            env=self._environment(),
            cwd=self.data_dir,
        )
        # the database URL, the claim and the supervisor's own pid (as the host sees it)
        send_secrets(proc, {"database": self.db_url, "claim": claim, "pid": proc.pid})
        return _Watched(set_id, proc.pid, claim, proc)

    def _environment(self) -> dict[str, str]:
        env = passed_on_environment()
        if self.api_url:
            env["LABQ_URL"] = self.api_url
        return env

    def _settings_file(self, set_id: int) -> Path:
        """The effective settings for the supervisor (without the database URL), mode 0600."""
        directory = self.data_dir / "supervisors"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"set-{set_id}.json"
        text = self.settings.model_dump_json(exclude={"database"})
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        return path

    # -- adopting after a restart ---------------------------------------------------

    def adopt(self, supervisors: Iterable[tuple[int, int, str]]) -> list[int]:
        """Take back supervisors recorded before a restart: ``(set_id, pid, claim)``.

        Give only the sets recorded on this host. A live supervisor of its set
        is watched until it exits; for any other (dead, or the pid now belongs
        to something else) ``on_finished(set_id, None, claim)`` is called once what
        it left behind is gone. Returns the sets adopted alive.
        """
        adopted: list[int] = []
        for set_id, pid, claim in supervisors:
            with self._lock:
                if set_id in self._watched:
                    continue
                alive = is_supervisor(pid, set_id)
                watched = _Watched(set_id, pid, claim, None)
                if alive:
                    self._watched[set_id] = watched
            if alive:
                adopted.append(set_id)
                self._spawn(self._poll_adopted, watched)
            else:
                containment.reap(containment.run_mark(claim))
                self._report(watched, None)
        return adopted

    # -- stopping -----------------------------------------------------------------------

    def stop(self, set_id: int) -> bool:
        """SIGTERM to the supervisor, SIGKILL to its process group after the grace period.

        The supervisor ends its tasks, archives the logs and reports the recipes
        ``cancelled`` on SIGTERM. The SIGTERM goes to the supervisor alone: a task it has
        just forked is in its group until the child calls setsid, with default signal
        handling already restored, and would die of it as if it had failed by itself.
        False when this dispatcher runs no such set.
        """
        with self._lock:
            watched = self._watched.get(set_id)
        if watched is None or not self._signal(watched, signal.SIGTERM, group=False):
            return False
        timer = threading.Timer(self.grace, self._kill, args=(watched,))
        timer.daemon = True
        timer.start()
        return True

    def kill(self, set_id: int) -> bool:
        """SIGKILL the supervisor (one that stopped heart-beating); its exit is reported as
        usual once everything it ran is gone. False when this dispatcher runs no such set."""
        with self._lock:
            watched = self._watched.get(set_id)
        return watched is not None and self._signal(watched, signal.SIGKILL)

    def _kill(self, watched: _Watched) -> None:
        with self._lock:
            if self._watched.get(watched.set_id) is not watched:
                return  # it exited in time
        _log.warning("supervisor of set %s did not stop in time: killing it", watched.set_id)
        self._signal(watched, signal.SIGKILL)

    def _signal(self, watched: _Watched, signum: signal.Signals, *, group: bool = True) -> bool:
        if watched.proc is not None:
            if watched.proc.poll() is not None:
                return False
        elif watched.exit is not None and not watched.exit.lost:
            # not reaped before the fork server reports it: the pid is still the child's
            # (which may not have taken its title yet)
            if watched.exit.seen.is_set():
                return False
        elif not is_supervisor(watched.pid, watched.set_id):
            return False  # never signal a pid that is no longer ours
        try:
            if group:
                os.killpg(watched.pid, signum)  # started with its own session: pgid == pid
            else:
                os.kill(watched.pid, signum)
        except ProcessLookupError:
            return False
        return True

    def running(self) -> list[int]:
        """The sets whose supervisor this dispatcher watches."""
        with self._lock:
            return sorted(self._watched)

    def shutdown(self) -> None:
        """Stop watching; supervisors keep running (a restarted server adopts them)."""
        self._closed.set()
        with self._lock:
            self._watched.clear()
        self._forker.close()

    # -- watching -----------------------------------------------------------------------

    def _spawn(self, target: Callable[[_Watched], None], watched: _Watched) -> None:
        thread = threading.Thread(
            target=target, args=(watched,), name=f"supervisor-{watched.set_id}", daemon=True
        )
        thread.start()

    def _wait_child(self, watched: _Watched) -> None:
        assert watched.proc is not None
        # Waiting also reaps it, after a shutdown too: no zombie is left behind.
        code = watched.proc.wait()
        self._done(watched, code)

    def _wait_forked(self, watched: _Watched) -> None:
        assert watched.exit is not None
        watched.exit.seen.wait()
        if watched.exit.lost:  # no one's child now: watched as an adopted one is
            self._poll_adopted(watched)
        else:
            self._done(watched, watched.exit.code)

    def _poll_adopted(self, watched: _Watched) -> None:
        while not self._closed.wait(self.poll_every):
            if not is_supervisor(watched.pid, watched.set_id):
                self._done(watched, None)
                return

    def _done(self, watched: _Watched, code: int | None) -> None:
        # Whatever the set's tasks left running dies before anyone hears the set ended
        # (in a PID namespace the kernel has seen to it already).
        containment.reap(containment.run_mark(watched.claim))
        with self._lock:
            if self._watched.get(watched.set_id) is not watched:
                return  # shut down, or replaced
            del self._watched[watched.set_id]
        self._report(watched, code)

    def _report(self, watched: _Watched, code: int | None) -> None:
        if self._closed.is_set():
            return
        try:
            self.on_finished(watched.set_id, code, watched.claim)
        except Exception:
            _log.exception("on_finished failed for recipe set %s", watched.set_id)
