"""Where tasks run: one small interface, a ``local`` and an ``ssh`` implementation.

A backend knows how to put a fresh workspace on a system (``provision``), find a
named task in it, run a command there, copy the system's logs back and clean it
up. Lab hooks (power, reimage, clean-up commands) wrap any backend; see
:mod:`labq.dispatch.hooks`.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from labq.dispatch.plan import SystemInfo, Workspace
from labq.dispatch.procs import Outcome

__all__ = ["Backend", "Outcome"]


class Backend(Protocol):
    """What the set runner needs of a place to run tasks."""

    def provision(
        self, system: SystemInfo, workspace: Workspace, *, cancel_event: threading.Event
    ) -> None:
        """Give the system a fresh workspace (a reimage), with the pinned checkout if any.

        Raises :class:`labq.errors.LabqError` (or ``OSError``) when it cannot.
        """
        ...

    def locate_task(self, system: SystemInfo, relpath: str) -> str | None:
        """The program for a named task (``tasks/<name>/run``), if there and executable.

        The answer is usable as ``command[0]`` of :meth:`run` with ``cwd=None``.
        """
        ...

    def put_task(self, system: SystemInfo, source: Path, relpath: str) -> None:
        """Copy the local task directory ``source`` (without ``.git``) to ``relpath`` of the
        system's workspace, replacing what was there."""
        ...

    def run(
        self,
        system: SystemInfo,
        command: Sequence[str] | str,
        *,
        env: Mapping[str, str],
        cwd: str | None,
        timeout: float | None,
        log_path: Path,
        cancel_event: threading.Event,
        secrets: Collection[str] = (),
    ) -> Outcome:
        """Run a command on the system and wait for it.

        A string is the user's shell command (run by ``/bin/sh -c``); a sequence
        is an argv run as it is. ``cwd`` is relative to the workspace (None: the
        workspace itself). Output goes to ``log_path`` (appended) with every
        secret masked. On timeout or when ``cancel_event`` is set, everything the
        command started is ended.
        """
        ...

    def collect_logs(self, system: SystemInfo, dest: Path) -> None:
        """Copy the system's logs (the workspace's ``logs/`` directory) into ``dest``."""
        ...

    def cleanup(self, system: SystemInfo, *, log_dir: Path) -> None:
        """Clean the system up after a failure or abort ("nuke")."""
        ...
