"""The ``local`` backend: a system is a workspace directory on this host.

``<data_dir>/workspaces/<fqdn>/`` is the whole machine: reimage wipes it, tasks
are subprocesses with it as their working directory, and its ``logs/``
directory is what ``collect_logs`` archives. It is the embedded default and what
the demo and the tests use.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import threading
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Final

from labq.dispatch.fetch import copy_task
from labq.dispatch.identity import TaskUser, hand_over, traversable
from labq.dispatch.logs import MaskedLog
from labq.dispatch.plan import PlanError, SystemInfo, Workspace, safe_component
from labq.dispatch.procs import DEFAULT_GRACE, Outcome, run_process

SHELL: Final = "/bin/sh"
_GUESTS: Final = "guests"  # a guest's workspace is <host's workspace>/guests/<name>
_DEFAULT_PATH: Final = "/usr/local/bin:/usr/bin:/bin"
# Passed on from the supervisor's own environment; everything else (a database
# URL with a password, say) stays out of the tasks' reach.
INHERITED: Final = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR")


def base_environment() -> dict[str, str]:
    """The few variables every local command starts from."""
    env = {k: os.environ[k] for k in INHERITED if k in os.environ}
    env.setdefault("PATH", _DEFAULT_PATH)
    return env


class LocalBackend:
    """Systems as directories under ``<data_dir>/workspaces``."""

    def __init__(
        self, data_dir: Path, *, grace: float = DEFAULT_GRACE, user: TaskUser | None = None
    ) -> None:
        self.data_dir = data_dir
        self.root = data_dir / "workspaces"
        self.grace = grace
        self.user = user  # who tasks run as (None: this process's own user)

    def workspace(self, system: SystemInfo) -> Path:
        """``<data_dir>/workspaces/<fqdn>``, or ``<host's>/guests/<name>`` for a guest;
        refuses a name that would point elsewhere."""
        if system.guest_of is not None:
            host = dataclasses.replace(system, fqdn=system.guest_of, guest_of=None)
            guests = self.workspace(host) / _GUESTS
            path = guests / safe_component(system.fqdn, "guest name")
            if path.resolve().parent != guests.resolve():
                raise PlanError(f"workspace of guest {system.fqdn} would not be under {guests}")
            return path
        path = self.root / safe_component(system.fqdn, "fqdn")
        if path.resolve().parent != self.root.resolve():
            raise PlanError(f"workspace of {system.fqdn} would not be under {self.root}")
        return path

    def provision(
        self, system: SystemInfo, workspace: Workspace, *, cancel_event: threading.Event
    ) -> None:
        """Wipe the workspace and fill it with the pinned checkout (or leave it empty)."""
        path = self.wipe(system)
        if workspace.checkout is not None:
            shutil.copytree(workspace.checkout, path, symlinks=True)
        else:
            path.mkdir()
        (path / "logs").mkdir(exist_ok=True)
        if self.user is not None:
            traversable(self.data_dir, self.root)
            hand_over(path.parent if system.guest_of else path, self.user)

    def wipe(self, system: SystemInfo) -> Path:
        """Remove the system's workspace; only ever a direct child of the workspaces root
        (or, for a guest, of its host's guests directory)."""
        path = self.workspace(system)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            path.unlink()
        elif path.exists():
            shutil.rmtree(path)
        return path

    def locate_task(self, system: SystemInfo, relpath: str) -> str | None:
        """The absolute path of ``<workspace>/<relpath>`` if it is an executable file."""
        path = self.workspace(system) / relpath
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
        return None

    def put_task(self, system: SystemInfo, source: Path, relpath: str) -> None:
        """Copy ``source`` into the workspace at ``relpath`` (handed to the task user)."""
        ws = self.workspace(system)
        dest = ws / relpath
        if not dest.resolve().is_relative_to(ws.resolve()):
            raise PlanError(f"{relpath} is not inside the workspace")
        dest.parent.mkdir(parents=True, exist_ok=True)
        copy_task(source, dest)
        if self.user is not None:
            hand_over(dest, self.user)

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
        """Run a subprocess in its own process group in the workspace."""
        ws = self.workspace(system)
        # the user's own command is the one place a shell is meant to interpret text
        argv = [SHELL, "-c", command] if isinstance(command, str) else list(command)
        full_env = base_environment()
        if self.user is not None:
            full_env.update(HOME=str(ws), USER=self.user.name, LOGNAME=self.user.name)
        full_env.update(env)
        full_env.update(LABQ_WORKSPACE=str(ws), LABQ_LOG_DIR=str(ws / "logs"))
        with MaskedLog(log_path, secrets) as log:
            return run_process(
                argv,
                cwd=ws / cwd if cwd else ws,
                env=full_env,
                timeout=timeout,
                log=log,
                cancel_event=cancel_event,
                grace=self.grace,
                user=None if self.user is None else (self.user.uid, self.user.gid),
            )

    def collect_logs(self, system: SystemInfo, dest: Path) -> None:
        """Copy ``<workspace>/logs`` into ``dest`` (symbolic links are copied as links)."""
        src = self.workspace(system) / "logs"
        if src.is_dir() and any(src.iterdir()):
            shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)

    def cleanup(self, system: SystemInfo, *, log_dir: Path) -> None:
        """Wipe the workspace."""
        self.wipe(system)
