"""Log files that never hold a secret, and where a set's logs live.

Layout under the data directory::

    logs/set-<id>/supervisor.log             what the supervisor did, with times
    logs/set-<id>/supervisor-output.log      what the supervisor process printed
    logs/set-<id>/<fqdn>/task-<id>-<name>.log  one task's output (stdout and stderr)
    logs/set-<id>/<fqdn>/hook-<hook>.log        a lab hook's output
    logs/set-<id>/<fqdn>/collected/           files the system's logs/ directory held
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Final

from labq.dispatch.plan import safe_component

MASK: Final = b"[secret]"
SUPERVISOR_OUTPUT: Final = "supervisor-output.log"
_SLUG: Final = re.compile(r"[^A-Za-z0-9._-]+")


class MaskedLog:
    """An append-only log file that replaces every secret with ``[secret]``.

    Output arrives in chunks, and a secret may be cut between two of them, so the
    last ``len(longest secret) - 1`` bytes are held back until more comes or the
    log is closed. Safe to use from several threads.
    """

    def __init__(self, path: Path, secrets: Iterable[str] = ()) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._secrets = sorted({s.encode() for s in secrets if s}, key=len, reverse=True)
        self._keep = max((len(s) for s in self._secrets), default=1) - 1
        self._pending = b""
        self._lock = threading.Lock()
        self._file = path.open("ab")

    def write(self, data: bytes) -> None:
        """Append output; whatever could be the start of a secret waits for the rest."""
        with self._lock:
            buf = self._mask(self._pending + data)
            cut = max(len(buf) - self._keep, 0)
            self._file.write(buf[:cut])
            self._file.flush()
            self._pending = buf[cut:]

    def line(self, text: str) -> None:
        """Append one line of labq's own text."""
        self.write(text.encode() + b"\n")

    def close(self) -> None:
        """Write what was held back and close the file."""
        with self._lock:
            if self._file.closed:
                return
            self._file.write(self._mask(self._pending))
            self._pending = b""
            self._file.close()

    def _mask(self, buf: bytes) -> bytes:
        for secret in self._secrets:
            buf = buf.replace(secret, MASK)
        return buf

    def __enter__(self) -> MaskedLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def mask_tree(root: Path, secrets: Iterable[str]) -> None:
    """Mask every secret in the regular files under ``root`` (logs collected from a system)."""
    wanted = [s for s in secrets if s]
    if not wanted or not root.is_dir():
        return
    for folder, _, files in os.walk(root):  # does not follow symbolic links
        for name in files:
            path = Path(folder, name)
            if path.is_symlink() or not path.is_file():
                continue
            tmp = path.with_name(f".{name}.masking")
            with path.open("rb") as src, MaskedLog(tmp, wanted) as out:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
            tmp.replace(path)


def stamp() -> str:
    """The wall-clock time for a log line."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def set_log_dir(data_dir: Path, set_id: int) -> Path:
    """``<data_dir>/logs/set-<id>``."""
    return data_dir / "logs" / f"set-{set_id}"


def system_log_dir(data_dir: Path, set_id: int, fqdn: str) -> Path:
    """``<data_dir>/logs/set-<id>/<fqdn>``."""
    return set_log_dir(data_dir, set_id) / safe_component(fqdn, "fqdn")


def task_log_name(task_id: int, name: str) -> str:
    """``task-<id>-<name as a file name>.log``."""
    slug = _SLUG.sub("_", name).strip("._")[:60] or "task"
    return f"task-{task_id}-{slug}.log"
