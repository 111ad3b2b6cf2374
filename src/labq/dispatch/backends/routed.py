"""A backend that wraps others: each call goes to the backend a system is routed to.

Lab hooks (:class:`~labq.dispatch.hooks.HookedBackend`), VM slots
(:class:`~labq.dispatch.vms.backend.VmBackend`) and guests made as VMs
(:class:`~labq.dispatch.vms.guests.VmGuests`) each wrap a lab's backend and change
only where some systems' calls go, and how they are provisioned and cleaned up.
The calls they pass on unchanged are written once, here.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from labq.dispatch.backends import Backend, Outcome
from labq.dispatch.plan import SystemInfo


class Routed:
    """Passes tasks, runs and log collection on to :meth:`route`'s backend."""

    def route(self, system: SystemInfo) -> tuple[Backend, SystemInfo]:
        """The backend that serves ``system``, and the system as that backend knows it."""
        raise NotImplementedError

    def locate_task(self, system: SystemInfo, relpath: str) -> str | None:
        """Where the routed backend finds the task."""
        backend, where = self.route(system)
        return backend.locate_task(where, relpath)

    def put_task(self, system: SystemInfo, source: Path, relpath: str) -> None:
        """Onto the routed backend's system."""
        backend, where = self.route(system)
        backend.put_task(where, source, relpath)

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
        """On the routed backend's system."""
        backend, where = self.route(system)
        return backend.run(
            where,
            command,
            env=env,
            cwd=cwd,
            timeout=timeout,
            log_path=log_path,
            cancel_event=cancel_event,
            secrets=secrets,
        )

    def collect_logs(self, system: SystemInfo, dest: Path) -> None:
        """From the routed backend's system."""
        backend, where = self.route(system)
        backend.collect_logs(where, dest)
