"""One log file of a job by any name for it, from a byte offset on, followed as it is written.

Following ends when the file's task (or, for another file, its recipe set) has
ended and everything written is sent, when the reader goes, or after
``FOLLOW_WINDOW`` seconds: a window keeps every answer bounded, so a server that
stops is never held up by a follower; the reader asks again from where it got to.
The API and the pages serve the same tail.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import anyio.to_thread
from sqlalchemy import Engine

from labq.errors import NotFoundError, RequestError
from labq.store import reading
from labq.usecases.logfind import LogTarget, find_log, running_tasks

FOLLOW_WINDOW: Final = 15.0  # seconds one following answer lasts at most
POLL: Final = 0.2  # seconds between looks at the file
RECHECK: Final = 1.0  # seconds between looks at the database: has its task ended?
CHUNK: Final = 1 << 16
Disconnected = Callable[[], Awaitable[bool]]  # has the reader gone?


@dataclass(frozen=True)
class LogTail:
    """The log a name meant, and its bytes from the offset on (as they are written, when
    followed)."""

    target: LogTarget
    body: AsyncIterator[bytes]

    def headers(self) -> dict[str, str]:
        """What an answer says of the file: its path, its task, whether it has ended."""
        target = self.target
        return {
            "X-Labq-Log-Path": target.path or "",
            "X-Labq-Log-Task": "" if target.task_id is None else str(target.task_id),
            "X-Labq-Log-Ended": "true" if target.ended else "false",
            "Cache-Control": "no-store",
        }


@dataclass(frozen=True)
class _Source:
    engine: Engine
    data_dir: Path
    job_id: int

    def resolve(self, name: str | None) -> LogTarget:
        """The log ``name`` means (None: the job's one running task)."""
        with reading(self.engine) as repo:
            job = repo.jobs.load_job(self.job_id)
        if name is not None:
            return find_log(job, self.data_dir, name)
        running = running_tasks(job, self.data_dir)
        if len(running) == 1:
            return running[0]
        if not running:
            raise NotFoundError(f"job {self.job_id} has no running task: name one", place="name")
        shown = "; ".join(t.label() for t in running)
        raise RequestError(
            f"job {self.job_id} runs several tasks: name one ({shown})", place="name"
        )


async def tail_log(
    engine: Engine,
    data_dir: Path,
    job_id: int,
    name: str | None,
    offset: int,
    *,
    follow: bool,
    disconnected: Disconnected,
) -> LogTail:
    """The log ``name`` means (its path, its file name, or a task's id or name; None: the
    job's one running task) from ``offset`` on; ``follow``: what is written, too."""
    source = _Source(engine, data_dir, job_id)
    target = await anyio.to_thread.run_sync(source.resolve, name)
    if target.path is None and not follow:
        raise NotFoundError(f"task {target.task_id} has no log yet", place="name")
    key = name if target.task_id is None else str(target.task_id)
    root = data_dir.resolve()
    if not follow or target.ended:
        body = _rest(root, target.path, offset)
    else:
        body = _follow(source, key or "", target, root, offset, disconnected)
    return LogTail(target, body)


async def _rest(root: Path, path: str | None, offset: int) -> AsyncIterator[bytes]:
    """The file from ``offset`` to its end, as it is now."""
    if path is None:
        return
    while chunk := _read(root / path, offset):
        offset += len(chunk)
        yield chunk


async def _follow(
    source: _Source,
    key: str,
    target: LogTarget,
    root: Path,
    offset: int,
    disconnected: Disconnected,
) -> AsyncIterator[bytes]:
    """What is written, until its task ends (and all is sent), the reader goes or the
    window closes."""
    start = last_check = time.monotonic()
    while time.monotonic() - start < FOLLOW_WINDOW:
        if time.monotonic() - last_check >= RECHECK:
            last_check = time.monotonic()
            # ended is read before the file: what was written before the end is all sent
            try:
                target = await anyio.to_thread.run_sync(source.resolve, key)
            except (NotFoundError, RequestError):  # its file went (pruned): what was sent stands
                return
        chunk = b"" if target.path is None else _read(root / target.path, offset)
        if chunk:
            offset += len(chunk)
            yield chunk
            continue
        if target.ended or await disconnected():
            return
        await asyncio.sleep(POLL)


def _read(path: Path, offset: int) -> bytes:
    """Up to ``CHUNK`` bytes at ``offset``; none when the file is not there (yet)."""
    try:
        with path.open("rb") as file:
            file.seek(offset)
            return file.read(CHUNK)
    except OSError:
        return b""
