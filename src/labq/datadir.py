"""The data directory: everything one installation keeps on disk, and whose it is.

An installation is one database. Its data directory holds the SQLite file by
default, and the logs, workspaces, supervisor files and cached checkouts of the
sets it runs. So that two installations on one host never read or wipe each
other's files, the directory is marked with the database's installation id on
first use (``installation``, a small JSON file), and a server refuses a data
directory marked for another database. On SQLite, one server at a time may
schedule on a database file: it holds an exclusive lock next to the file for as
long as it runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import IO, Final

from sqlalchemy import make_url
from sqlalchemy.exc import ArgumentError

from labq.errors import LabqError

MARKER: Final = "installation"


def shown(url: str) -> str:
    """A database URL as it may be printed: without its password."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(an unreadable URL)"


def claim(data_dir: Path, installation: str, database: str) -> None:
    """Make ``data_dir`` this installation's, or refuse if it is another's (one line)."""
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    marker = data_dir / MARKER
    try:
        found = json.loads(marker.read_text())
    except FileNotFoundError:
        _write(marker, {"installation": installation, "database": shown(database)})
        return
    except (OSError, ValueError) as exc:
        raise LabqError(f"cannot read {marker}: {exc}") from None
    owner = found.get("installation") if isinstance(found, dict) else None
    if owner != installation:
        theirs = found.get("database", "?") if isinstance(found, dict) else "?"
        raise LabqError(
            f"data directory {data_dir} belongs to another labq installation (database"
            f" {theirs}), not to {shown(database)}: give this one its own with --data-dir"
            " or LABQ_DATA_DIR"
        )


def _write(marker: Path, content: dict[str, str]) -> None:
    fresh = marker.with_name(f".{marker.name}.{os.getpid()}")
    fresh.write_text(json.dumps(content) + "\n")
    try:
        os.link(fresh, marker)  # never replaces a marker another server wrote meanwhile
    except FileExistsError:
        pass
    finally:
        fresh.unlink()
    if json.loads(marker.read_text()).get("installation") != content["installation"]:
        claim(marker.parent, content["installation"], content["database"])


class DatabaseLock:
    """The one-server-per-SQLite-file lock: ``<file>.server.lock``, held while it runs."""

    def __init__(self, database_file: Path) -> None:
        self.database = database_file
        self.path = database_file.with_name(database_file.name + ".server.lock")
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        """Take the lock, or say in one line who holds it."""
        handle = self.path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise LabqError(
                f"another labq server ({holder}) runs on {self.database}:"
                " one server per SQLite database"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        self._file = handle

    def release(self) -> None:
        """Let the next server have it."""
        if self._file is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None
