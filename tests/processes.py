"""Processes the tests start: as a terminal would start them, and none left behind.

Servers, supervisors and tasks start sessions of their own, so a test cannot stop them by
killing its child alone; each lives (command line or working directory) under the test's
directory, which is how :func:`kill_under` finds what is left once a test is over.
"""

from __future__ import annotations

import os
import signal
import sys
from contextlib import suppress
from pathlib import Path

# SIGINT back at its default before the command runs: a foreground job of a terminal has it
# so, but a background job of a non-interactive shell inherits it ignored (SIG_IGN survives
# exec, and Python then installs no KeyboardInterrupt handler), and Ctrl-C would do nothing.
_RESET_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)


def as_in_a_terminal(command: list[str]) -> list[str]:
    """``command`` started with SIGINT at its default, as Ctrl-C in a terminal expects."""
    return [sys.executable, "-c", _RESET_SIGINT, *command]


def under(root: Path) -> dict[int, str]:
    """Live processes whose command line or working directory lies under ``root``."""
    found = {}
    mine = os.getpid()
    place = str(root)
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == mine:
            continue
        try:
            command = Path("/proc", entry, "cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(f"/proc/{entry}/cwd")
            state = Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError, UnicodeDecodeError):
            continue  # gone, or not ours to look at
        words = f"{command} "
        inside = f"{place}/" in words or f"{place} " in words or f"{cwd}/".startswith(f"{place}/")
        if state != "Z" and inside:
            found[int(entry)] = command
    return found


def kill_under(root: Path) -> dict[int, str]:
    """SIGKILL every process :func:`under` finds, with the process group it leads; what was
    found (empty when the test left nothing)."""
    found = under(root)
    ours = os.getpgrp()
    for pid in found:
        with suppress(ProcessLookupError, PermissionError):
            group = os.getpgid(pid)
            if group == pid and group != ours:
                os.killpg(group, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
    return found
