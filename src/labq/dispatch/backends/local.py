"""The ``local`` backend: a system is a workspace directory on this host.

``<data_dir>/workspaces/<fqdn>/`` is the whole machine: reimage wipes it, tasks
are subprocesses with it as their working directory, and its ``logs/``
directory is what ``collect_logs`` archives. It is the embedded default and what
the demo and the tests use.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Final

from labq.dispatch.identity import TaskUser, hand_over, traversable
from labq.dispatch.logs import MaskedLog
from labq.dispatch.plan import PlanError, SystemInfo, Workspace, safe_component
from labq.dispatch.procs import DEFAULT_GRACE, Outcome, run_process

SHELL: Final = "/bin/sh"
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
        """``<data_dir>/workspaces/<fqdn>``; refuses an fqdn that would point elsewhere."""
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
            hand_over(path, self.user)

    def wipe(self, system: SystemInfo) -> Path:
        """Remove the system's workspace; only ever a direct child of the workspaces root."""
        path = self.workspace(system)
        self.root.mkdir(parents=True, exist_ok=True)
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
