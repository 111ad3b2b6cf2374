"""How a supervisor and everything its tasks start are kept together, so they die together.

A set's systems may be handed to the next set only when nothing of the old set
can still run on them. Two ways, chosen once per dispatcher:

- ``pidns`` (root, or wherever ``unshare`` may make namespaces): the supervisor
  runs as process 1 of a PID namespace of its own (``unshare --pid --fork
  --kill-child --mount-proc``). When it dies, by any signal, the kernel kills
  every process in the namespace — tasks that left their process group, daemons
  they started — before its death is seen. Nothing escapes.
- ``group`` (elsewhere): the supervisor leads its own session, each task its own
  process group. Every task carries a run mark in its environment; once the
  supervisor is gone, :func:`reap` kills every process that still carries the
  mark. A task that clears its environment and leaves its group escapes this:
  run the server as root (or somewhere ``unshare`` works) to close that gap.

Either way a supervisor's process is made non-dumpable (:func:`keep_private`), so
a task of the same user cannot read its memory or environment through ``/proc``.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Final, Literal

from labq.dispatch.procs import process_alive

Mode = Literal["pidns", "group"]
MARK_VARIABLE: Final = "LABQ_RUN_MARK"
_PR_SET_DUMPABLE: Final = 4
_UNSHARE: Final = ("--pid", "--fork", "--kill-child=SIGKILL", "--mount-proc")
# What a supervisor inherits of its starter's environment: nothing that could be a secret.
PASSED_ON: Final = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "TZ",
    "TMPDIR",
    "SSH_AUTH_SOCK",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "LABQ_DEBUG",
)

log = logging.getLogger(__name__)


@cache
def available_mode() -> Mode:
    """``pidns`` when a PID namespace can be made here (tried once), else ``group``."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return "group"
    try:
        done = subprocess.run(
            [unshare, *_UNSHARE, "true"], capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return "group"
    return "pidns" if done.returncode == 0 else "group"


def wrap(argv: Sequence[str], mode: Mode) -> list[str]:
    """The command that runs ``argv`` contained the ``mode`` way."""
    if mode == "group":
        return list(argv)
    unshare = shutil.which("unshare") or "unshare"
    return [unshare, *_UNSHARE, *argv]


def runs_set(pid: int, module: str, set_id: int) -> bool:
    """True when ``pid`` is alive and runs ``python -m <module> --set <set_id>`` (by its command
    line: a supervisor, the server's or a lab agent's, is known again after a restart so).

    A zombie has an empty command line, so it counts as dead; so does a pid
    that was reused by another program.
    """
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    args = [a.decode(errors="replace") for a in raw.split(b"\0")]
    if module not in args:
        return False
    wanted = str(set_id)
    return any(
        (a == "--set" and i + 1 < len(args) and args[i + 1] == wanted) or a == f"--set={wanted}"
        for i, a in enumerate(args)
    )


def run_mark(claim: str) -> str:
    """The mark a set's tasks carry (derived from the claim, which only the store and the
    supervisor know, so a restarted dispatcher finds the same mark)."""
    return hashlib.sha256(f"labq-run:{claim}".encode()).hexdigest()[:24]


def keep_private() -> None:
    """Make this process non-dumpable: its ``/proc`` memory and environment become
    readable by root only, whatever runs beside it as the same user."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: nothing to do
        return


def reap(mark: str, *, timeout: float = 5.0) -> int:
    """Kill every process of this user that carries ``mark``; returns how many there were."""
    needle = f"{MARK_VARIABLE}={mark}".encode()
    found = [pid for pid in _pids() if _carries(pid, needle)]
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
    deadline = time.monotonic() + timeout
    while any(process_alive(pid) for pid in found) and time.monotonic() < deadline:
        time.sleep(0.02)
    if found:
        log.warning("killed %d process(es) a dead supervisor left behind", len(found))
    return len(found)


def _pids() -> list[int]:
    proc = Path("/proc")
    return [int(p.name) for p in proc.iterdir() if p.name.isdigit()] if proc.is_dir() else []


def _carries(pid: int, needle: bytes) -> bool:
    try:
        return needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
