"""The fork server: one process with the supervisor's modules imported, forking a
supervisor per started set.

    python -m labq.dispatch.forkserver FD ROOM

Starting ``python -m labq.dispatch.supervisor`` costs most of a second of imports
and tens of megabytes per set. The dispatcher starts this process once instead
(:class:`labq.dispatch.forks.ForkServer`); it imports everything a supervisor
needs, freezes the garbage collector's view of those objects (so a child's
collections do not write to the pages it shares with us), and then forks one
child per request, which becomes exactly what a spawned supervisor is: its own
session and process group, its output in the set's log, the minimal
environment, a command line that names it (:mod:`labq.dispatch.title`), and —
in ``pidns`` mode — process 1 of a PID namespace of its own
(:mod:`labq.dispatch.namespace`). No database engine exists here: the child
makes its own.

FD is one end of a ``SOCK_SEQPACKET`` socket pair; each packet is one JSON
object. Requests: ``{"set", "config", "data_dir", "cwd", "log", "env", "mode",
"secrets"}`` (a lab agent's also ``"module": "labq.agent.supervisor"`` and its
set's ``"dir"``: :func:`labq.agent.supervisor.forked`); replies, in order:
``{"set", "pid"}`` or ``{"set", "error"}``;
and, whenever a child ends, ``{"exited": set, "pid", "code"}`` (``code`` as
``Popen.returncode`` has it). The secrets (database URL, claim) travel on the
socket only, never on a command line or in an environment. When the dispatcher
goes (end of file) the fork server exits; its supervisors run on, to be adopted.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
import traceback
from collections.abc import Mapping, Sequence
from typing import Any, Final

from sqlalchemy.orm import configure_mappers

from labq.dispatch import supervisor
from labq.dispatch.containment import keep_private
from labq.dispatch.forkwire import PACKET
from labq.dispatch.namespace import run_as_init
from labq.dispatch.title import arg_area, set_title

# Imported here so that no child pays for them: the rest is imported by the first
# connection, a settings file, a thread's queue. The database's driver (or a lab agent's
# supervisor) is named on the command line (:mod:`labq.dispatch.forkwire`).
_PRELOAD: Final = ("email.parser", "encodings.utf_8_sig", "queue")
# Supervisors a request may name (``module``): the server's, and a lab agent's, which is
# given its set's directory (``dir``) and its secrets instead of a database URL.
AGENT_SUPERVISOR: Final = "labq.agent.supervisor"


def supervisor_title(set_id: int, module: str = supervisor.__name__) -> list[str]:
    """The command line a forked supervisor shows (the dispatcher, or the agent, knows it)."""
    return ["labq", "-m", module, "--set", str(set_id), "--forked"]


def preload(named: Sequence[str] = ()) -> None:
    """Import what a supervisor will need, then keep those objects out of collections."""
    for name in (*_PRELOAD, *named):
        with contextlib.suppress(ImportError):  # a driver that is not installed
            __import__(name)
    configure_mappers()  # else done by every child's first query
    gc.collect()
    gc.freeze()


class _Server:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.area = arg_area()
        self.children: dict[int, int] = {}  # pid -> set id
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda _s, _f: None)  # only to wake select

    def serve(self) -> None:
        """Fork on request, report exits, until the dispatcher goes."""
        while True:
            ready, _, _ = select.select([self.sock.fileno(), self.wake_r], [], [])
            if self.wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(self.wake_r, 4096)
            self.reap()
            if self.sock.fileno() in ready:
                data = self.sock.recv(PACKET)
                if not data:
                    return
                self.send(self.handle(json.loads(data)))

    def handle(self, request: Mapping[str, Any]) -> dict[str, object]:
        set_id = int(request["set"])
        try:
            pid = self.fork(request)
        except OSError as exc:
            return {"set": set_id, "error": str(exc)}
        self.children[pid] = set_id
        return {"set": set_id, "pid": pid}

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            set_id = self.children.pop(pid, None)
            code = os.waitstatus_to_exitcode(status)
            self.send({"exited": set_id, "pid": pid, "code": code})

    def send(self, message: Mapping[str, object]) -> None:
        self.sock.send(json.dumps(message).encode())

    def fork(self, request: Mapping[str, Any]) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid:
            return pid
        code = supervisor.EXIT_COULD_NOT_RUN
        try:
            self._leave()
            code = _become_supervisor(request, self.area)
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def _leave(self) -> None:
        """In the child: let go of everything that is the fork server's."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        self.sock.close()
        os.close(self.wake_r)
        os.close(self.wake_w)


def _become_supervisor(request: Mapping[str, Any], area: tuple[int, int]) -> int:
    """In the child: take the place a spawned supervisor would have, and run the set."""
    set_id = int(request["set"])
    os.setsid()  # its own session and process group, as the dispatcher signals it
    _redirect(str(request["log"]))
    os.chdir(str(request["cwd"]))
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in request["env"].items()})
    pidns = request["mode"] == "pidns"
    module = str(request.get("module") or supervisor.__name__)
    title = supervisor_title(set_id, module)
    # in a namespace, the keeper is the process the dispatcher knows: it says so
    set_title(title + (["--keeper"] if pidns else []), area)
    host_pid = os.getpid()  # what the dispatcher watches, and the supervisor records

    def run() -> int:
        if pidns:
            set_title(title, area)
        cancel = supervisor.prepare()
        if module == AGENT_SUPERVISOR:  # imported by name: labq.agent builds on labq.dispatch
            agent_supervisor: Any = importlib.import_module(AGENT_SUPERVISOR)
            code: int = agent_supervisor.forked(set_id, {**request, "pid": host_pid}, cancel)
            return code
        given = {**request["secrets"], "pid": host_pid}
        config, data_dir = request["config"], request["data_dir"]
        return supervisor.run(set_id, given, config=config, data_dir=data_dir, cancel=cancel)

    if pidns:
        keep_private()  # the keeper holds the secrets too
        return run_as_init(run)
    return run()


def _redirect(log: str) -> None:
    """Standard input from /dev/null; output and errors appended to the set's log."""
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(null)
    os.close(out)


def main(argv: list[str] | None = None) -> int:
    """Serve the socket whose descriptor is the first argument."""
    args = sys.argv[1:] if argv is None else argv
    keep_private()  # secrets pass through here
    sock = socket.socket(fileno=int(args[0]))
    preload(args[2:])  # after the descriptor and the room for titles
    _Server(sock).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
