"""The dispatcher's handle on its fork server (:mod:`labq.dispatch.forkserver`).

:class:`ForkServer` starts the fork server in a session of its own, with the
same minimal environment a supervisor gets, and talks to it over a
``SOCK_SEQPACKET`` socket pair: one request at a time, answered in order, while
a reader thread routes the exits the fork server reports to the callback given
with each fork. When the fork server goes (it died, or was killed), every
callback still waiting is called with None: its supervisor may be running on,
no longer anyone's child, and must be watched as an adopted one is.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import socket
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from labq.dispatch.forkwire import MODULE, PACKET
from labq.dispatch.title import ROOM

OnExit = Callable[[int | None], None]  # the exit code; None: the fork server went first
ANSWER_TIMEOUT: Final = 30.0  # the first answer waits for the fork server's imports

_log = logging.getLogger(__name__)


class ForkedExit:
    """How a forked supervisor ended, as its fork server reports it."""

    def __init__(self) -> None:
        self.seen = threading.Event()
        self.code: int | None = None
        self.lost = False  # the fork server went first: the supervisor may run on

    def __call__(self, code: int | None) -> None:
        self.code, self.lost = code, code is None
        self.seen.set()


class ForkServerError(RuntimeError):
    """The fork server is gone, or could not fork."""


class ForkServer:
    """A running fork server; :meth:`fork` a supervisor, :meth:`close` to let it go."""

    def __init__(
        self,
        python: str,
        *,
        env: Mapping[str, str],
        cwd: Path,
        log: Path,
        preload: Sequence[str] = (),
    ) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with log.open("ab") as out:
                self.proc = subprocess.Popen(
                    [python, "-m", MODULE, str(theirs.fileno()), ROOM, *preload],
                    pass_fds=[theirs.fileno()],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=dict(env),
                    cwd=cwd,
                    start_new_session=True,  # a Ctrl-C meant for the server does not reach it
                )
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        self.sock = ours
        self._request_lock = threading.Lock()  # one request in flight
        self._lock = threading.Lock()  # guards what follows
        self._pending: OnExit | None = None
        self._waiting: dict[int, OnExit] = {}  # pid -> its callback
        self._alive = True
        self.forked = 0  # supervisors forked so far
        self._answers: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, name="fork-server", daemon=True).start()

    @property
    def alive(self) -> bool:
        """False once the fork server has gone (then it never comes back)."""
        with self._lock:
            return self._alive

    def fork(self, request: Mapping[str, object], on_exit: OnExit) -> int:
        """Fork a supervisor for ``request``; its pid. ``on_exit`` is called once, later,
        from another thread. Raises :class:`ForkServerError` when no supervisor was made."""
        with self._request_lock:
            with self._lock:
                if not self._alive:
                    raise ForkServerError("the fork server has gone")
                self._pending = on_exit
            try:
                self.sock.send(json.dumps(request).encode())
                answer = self._answers.get(timeout=ANSWER_TIMEOUT)
            except (OSError, queue.Empty) as exc:
                self._abandon()  # an answer that comes late must not be taken for the next
                raise ForkServerError(f"the fork server did not answer: {exc!r}") from exc
        if answer is None:
            raise ForkServerError("the fork server has gone")
        if "error" in answer:
            raise ForkServerError(str(answer["error"]))
        self.forked += 1
        return int(answer["pid"])

    def close(self) -> None:
        """Let the fork server go (it exits; the supervisors it forked run on)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)

    def _abandon(self) -> None:
        _log.warning("fork server %s does not answer: killing it", self.proc.pid)
        self.proc.kill()  # its supervisors lead sessions of their own: they live on
        self.close()

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(PACKET)
            except OSError:
                data = b""
            if not data:
                break
            self._route(json.loads(data))
        with self._lock:
            self._alive = False
            orphans = list(self._waiting.values())
            self._waiting.clear()
        self._answers.put(None)
        self.sock.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)  # no zombie left behind
        for on_exit in orphans:
            on_exit(None)

    def _route(self, message: dict[str, Any]) -> None:
        if "exited" in message:
            with self._lock:
                on_exit = self._waiting.pop(int(message["pid"]), None)
            if on_exit is not None:
                on_exit(int(message["code"]))
            return
        with self._lock:  # an answer: the pid is watched before anyone hears of it
            if "pid" in message and self._pending is not None:
                self._waiting[int(message["pid"])] = self._pending
            self._pending = None
        self._answers.put(message)
