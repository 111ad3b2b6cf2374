"""Local processes in their own process group, ended as a whole.

A task or hook is started with ``start_new_session=True`` so that it and every
process it starts share one process group. On timeout or cancel the whole group
gets SIGTERM, then SIGKILL after a grace period, so grandchildren die too. When
the main process exits by itself, whatever it left running in its group is ended
the same way: a task does not leave stray processes behind.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from labq.dispatch.logs import MaskedLog

DEFAULT_GRACE: Final = 5.0
_POLL: Final = 0.02
_DRAIN: Final = 2.0  # how long output is still read after the group has gone


@dataclass(frozen=True)
class Outcome:
    """How a command ended: its exit code (negative: killed by that signal), and why."""

    exit_code: int | None
    timed_out: bool = False
    cancelled: bool = False


class StartError(OSError):
    """The command could not be started at all (missing program, missing directory)."""


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float | None,
    log: MaskedLog,
    cancel_event: threading.Event | None = None,
    grace: float = DEFAULT_GRACE,
    clock: Callable[[], float] = time.monotonic,
    user: tuple[int, int] | None = None,
) -> Outcome:
    """Run ``argv`` (no shell), its stdout and stderr to ``log``; end its group when done.

    ``user`` is the ``(uid, gid)`` to run as (the caller must be root), with no other groups.
    """
    as_user: dict[str, object] = (
        {} if user is None else {"user": user[0], "group": user[1], "extra_groups": []}
    )
    try:
        proc = subprocess.Popen(  # type: ignore[call-overload]
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            **as_user,
        )
    except OSError as exc:
        raise StartError(exc.errno, f"cannot start {argv[0]!r}: {exc.strerror}") from exc
    assert proc.stdout is not None
    group_done = threading.Event()
    pump = threading.Thread(target=_pump, args=(proc.stdout.fileno(), log, group_done), daemon=True)
    pump.start()
    deadline = None if timeout is None else clock() + timeout
    try:
        timed_out, cancelled = _wait(proc, deadline, cancel_event, clock)
    finally:
        end_group(proc, grace)
        group_done.set()
        pump.join(_DRAIN + 1)
        proc.stdout.close()
    return Outcome(proc.returncode, timed_out=timed_out, cancelled=cancelled)


def _wait(
    proc: subprocess.Popen[bytes],
    deadline: float | None,
    cancel_event: threading.Event | None,
    clock: Callable[[], float],
) -> tuple[bool, bool]:
    """Wait for ``proc`` to exit, the deadline or the cancel: ``(timed_out, cancelled)``."""
    while proc.poll() is None:
        if cancel_event is not None and cancel_event.is_set():
            return False, True
        if deadline is not None and clock() >= deadline:
            return True, False
        if cancel_event is not None:
            cancel_event.wait(_POLL)
        else:
            time.sleep(_POLL)
    return False, False


def end_group(proc: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM the process group, SIGKILL what is left after ``grace`` seconds; reap the leader."""
    pgid = proc.pid  # start_new_session: the leader's pid is the group's id
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, _DRAIN)):
        proc.poll()
        if not group_alive(pgid):
            break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        end = time.monotonic() + wait
        while time.monotonic() < end:
            proc.poll()
            if not group_alive(pgid):
                break
            time.sleep(_POLL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=_DRAIN)


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs (zombies waiting to be reaped do not count)."""
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for stat in proc_dir.glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp …": comm may hold spaces and parentheses
        fields = text[text.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def process_alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rfind(")") + 2 :].split()[0] not in ("Z", "X")


def _pump(fd: int, log: MaskedLog, group_done: threading.Event) -> None:
    """Copy the pipe to the log until EOF, or until the group is gone and output stops."""
    stop_at: float | None = None
    while True:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            data = os.read(fd, 65536)
            if not data:
                return
            log.write(data)
        if group_done.is_set():
            # a process that left the group (setsid) may hold the pipe open for ever
            stop_at = stop_at or time.monotonic() + _DRAIN
            if not ready or time.monotonic() >= stop_at:
                return
