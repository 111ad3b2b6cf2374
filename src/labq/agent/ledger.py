"""The sets an agent has claimed, as its data directory records them.

    <data dir>/sets/set-<id>/    the set's spool (:mod:`labq.agent.spool`)
    <data dir>/logs/set-<id>/    its logs, as any supervisor writes them (:mod:`labq.dispatch.logs`)

A set whose spool says ``ended`` has nothing left to send; the newest ``keep``
of those are kept (a local copy of their logs), older ones deleted. One agent
at a time may use a data directory (:func:`hold`): two would adopt each other's
supervisors.
"""

from __future__ import annotations

import fcntl
import shutil
from pathlib import Path
from typing import IO

from labq.agent.spool import SetDir
from labq.dispatch.logs import set_log_dir
from labq.errors import LabqError


class DataDirBusyError(LabqError):
    """Another agent uses the data directory."""


def sets_root(data_dir: Path) -> Path:
    """``<data dir>/sets``."""
    return data_dir / "sets"


def hold(data_dir: Path) -> IO[bytes]:
    """Make the data directory this process's (kept while the returned file stays open)."""
    sets_root(data_dir).mkdir(parents=True, exist_ok=True, mode=0o700)
    handle = (data_dir / "agent.lock").open("ab")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise DataDirBusyError(f"another labq agent uses the data directory {data_dir}") from None
    return handle


def spools(data_dir: Path) -> list[SetDir]:
    """Every set directory, oldest set first."""
    root = sets_root(data_dir)
    found = [SetDir(p) for p in root.iterdir() if SetDir.is_one(p)] if root.is_dir() else []
    return sorted(found, key=lambda s: s.set_id)


def unfinished(data_dir: Path) -> list[SetDir]:
    """The sets with something left to do: a supervisor to watch, reports or logs to send."""
    return [s for s in spools(data_dir) if s.ended() is None]


def prune(data_dir: Path, keep: int) -> list[int]:
    """Delete all but the newest ``keep`` finished sets (their spool and logs); their ids."""
    done = [s for s in spools(data_dir) if s.ended() is not None]
    doomed = done[: max(len(done) - max(keep, 0), 0)]
    for spool in doomed:
        shutil.rmtree(set_log_dir(data_dir, spool.set_id), ignore_errors=True)
        shutil.rmtree(spool.path, ignore_errors=True)
    return [s.set_id for s in doomed]
