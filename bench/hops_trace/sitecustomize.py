"""The tracer of ``bench/hops.py``, loaded by every Python process started with a copy of it
on ``PYTHONPATH`` (Python imports ``sitecustomize`` at start-up). It does nothing unless a
file ``hops_trace.json`` lies beside it: ``{"folder": …, "ignore": [thread names]}``.
(A file, not an environment variable: the dispatcher passes only a few variables on to
its supervisors, ``PYTHONPATH`` among them.)

Then it records, in every thread, each call from a function of one labq module to a
function of another: a *hop*. Code that an import runs (anything below an importlib frame)
makes no hops. A call into labq from outside it (a library calling back: click, uvicorn,
SQLAlchemy…) is written as an *entry*, whose caller is the outside package. Only calls made
while the window is open count: from the moment the file ``start`` exists in the folder
until ``stop`` does (looked at no more often than every 20 ms); threads named in
``ignore`` are not followed. Each process writes the first occurrence of each of its hops
to a file of its own in the folder as it happens (a forked child too), so a process that
ends by ``os._exit`` loses nothing.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hops_trace.json")
_LOOK_EVERY_NS = 20_000_000
# an import running a module, and dataclasses making a class's methods: no calls of the path
_NOT_CALLS = frozenset({"<module>", "__create_fn__"})
# a comprehension handed down and iterated there runs its own module's code below the
# callee: data flowing, not control handed back up, so it is never a climb
_LAZY = frozenset({"<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>"})


class _Tracer:
    def __init__(self, folder: str, ignored: frozenset[str]) -> None:
        self.ignored = ignored
        self.start = os.path.join(folder, "start")
        self.stop = os.path.join(folder, "stop")
        self.folder = folder
        self.looked = 0
        self.open = False
        self.seen: set[tuple[str, str, bool]] = set()
        self.seen_ignored: set[str] = set()
        self.pid = os.getpid()
        self.first_pid = self.pid
        self.role = _command()
        self.out: Any = None

    def window_open(self, now: int) -> bool:
        if now - self.looked > _LOOK_EVERY_NS:
            self.looked = now
            self.open = os.path.exists(self.start) and not os.path.exists(self.stop)
        return self.open

    def forked(self, pid: int) -> None:
        """A forked child writes a file of its own and every hop of its own again."""
        self.pid = pid
        self.seen = set()
        self.seen_ignored = set()
        self.out = None

    def write(self, now: int, fields: tuple[str, ...]) -> None:
        if self.out is None:
            # a supervisor in a PID namespace of its own may be pid 1 there, as another is
            path = os.path.join(self.folder, f"{self.pid}-{os.urandom(4).hex()}.tsv")
            self.out = open(path, "a", buffering=1)  # noqa: SIM115 (open as long as the process)
        role = self.role if self.pid == self.first_pid else f"forked from {self.role}"
        thread = threading.current_thread().name
        self.out.write("\t".join((str(now), str(self.pid), role, thread, *fields)) + "\n")

    def __call__(self, frame: Any, event: str, arg: object) -> None:
        if event != "call":
            return
        code = frame.f_code
        callee = _module(frame.f_globals)
        if not callee.startswith("labq") or code.co_name in _NOT_CALLS:
            return
        back = frame.f_back
        caller = _module(back.f_globals) if back is not None else "?"
        if caller == callee or (back is not None and back.f_code.co_name == "<module>"):
            return
        now = time.monotonic_ns()
        if not self.window_open(now):
            return
        pid = os.getpid()
        if pid != self.pid:
            self.forked(pid)
        inside = caller.startswith("labq")
        climb = inside and code.co_name not in _LAZY and _on_stack(callee, back)
        key = (caller if inside else caller.split(".")[0], callee, climb)
        if key in self.seen:
            return
        thread = threading.current_thread().name
        if thread in self.ignored:
            if thread not in self.seen_ignored:  # say it was there: the name is still right
                self.seen_ignored.add(thread)
                self.write(now, ("ignored", caller, "", callee, ""))
            return
        if _importing(back):
            return
        self.seen.add(key)
        kind = "hop" if inside else "entry"
        where = back.f_code.co_qualname if back is not None else "?"
        self.write(now, (kind, caller, where, callee, code.co_qualname, "1" if climb else "0"))


def _command() -> str:
    """This process's command, short: ``labq job submit``, ``labq.dispatch.forkserver``."""
    with open("/proc/self/cmdline", "rb") as cmdline:
        words = cmdline.read().decode(errors="replace").split("\0")
    if os.path.basename(words[0]).startswith("python"):
        words = words[1:]
    if words and words[0] == "-m":
        return words[1]
    return " ".join([os.path.basename(words[0]), *words[1:3]])


def _on_stack(module: str, caller: Any) -> bool:
    """Whether ``module`` has a frame below the caller's on this thread's stack: the call
    climbs back into a module that handed control on and is still waiting for it (a
    callback, a part calling its owner) rather than going on down."""
    frame = caller.f_back
    while frame is not None:
        if frame.f_globals.get("__name__") == module:
            return True
        frame = frame.f_back
    return False


def _importing(frame: Any) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _module(globals_: dict[str, Any]) -> str:
    name = globals_.get("__name__", "?")
    if name == "__main__":  # python -m labq.something
        spec = globals_.get("__spec__")
        name = spec.name if spec is not None else name
    return str(name)


if os.path.exists(_CONFIG):
    with open(_CONFIG) as config:
        _wanted = json.load(config)
    _tracer = _Tracer(_wanted["folder"], frozenset(_wanted["ignore"]))
    threading.setprofile(_tracer)
    sys.setprofile(_tracer)
