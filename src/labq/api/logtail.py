"""``/jobs/{id}/logs/tail``: one log file by any name for it, followed as it is written.

The answer is plain text sent in chunks (HTTP/1.1 chunked transfer) from byte
``offset`` on. Following, it ends when the file's task (or, for another file,
its recipe set) has ended and everything written is sent, when the client goes,
or after ``FOLLOW_WINDOW`` seconds: a window keeps every answer bounded, so a
server that stops is never held up by a follower; the client asks again from
where it got to. ``X-Labq-Log-Ended: true`` says that nothing more will come.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Final

import anyio.to_thread
from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import Field

from labq.api.deps import AppState, StateDep, UserDep
from labq.api.errors import ApiError
from labq.api.logfind import LogTarget, find_log, running_tasks
from labq.api.openapi import answers
from labq.api.schemas import INTEGRAL, RowId
from labq.store import reading

router = APIRouter(prefix="/jobs", tags=["jobs"])

FOLLOW_WINDOW: Final = 15.0  # seconds one following answer lasts at most
POLL: Final = 0.2  # seconds between looks at the file
RECHECK: Final = 1.0  # seconds between looks at the database: has its task ended?
CHUNK: Final = 1 << 16
ByteOffset = Annotated[int, Field(ge=0, le=2**62), INTEGRAL]
PLAIN: Final = "text/plain; charset=utf-8"


@router.get("/{job_id}/logs/tail", response_class=StreamingResponse, responses=answers(404, 422))
async def tail_log(
    job_id: RowId,
    request: Request,
    app: StateDep,
    _: UserDep,
    name: Annotated[str | None, Query(min_length=1, max_length=4096)] = None,
    offset: ByteOffset = 0,
    follow: bool = False,
) -> StreamingResponse:
    """A log file from ``offset`` on; ``name`` is its path, its file name, or a task's id or
    name (left out: the job's one running task). ``follow``: keep sending what is written."""
    target = await anyio.to_thread.run_sync(_resolve, app, job_id, name)
    if target.path is None and not follow:
        raise ApiError(404, f"task {target.task_id} has no log yet", place="name")
    key = name if target.task_id is None else str(target.task_id)
    headers = {
        "X-Labq-Log-Path": target.path or "",
        "X-Labq-Log-Task": "" if target.task_id is None else str(target.task_id),
        "X-Labq-Log-Ended": "true" if target.ended else "false",
        "Cache-Control": "no-store",
    }
    root = app.settings.data_path().resolve()
    if not follow or target.ended:
        body = _rest(root, target.path, offset)
    else:
        body = _follow(request, app, job_id, key or "", target, root, offset)
    return StreamingResponse(body, media_type=PLAIN, headers=headers)


def _resolve(app: AppState, job_id: int, name: str | None) -> LogTarget:
    with reading(app.engine) as repo:
        job = repo.jobs.load_job(job_id)
    data_dir = app.settings.data_path()
    if name is not None:
        return find_log(job, data_dir, name)
    running = running_tasks(job, data_dir)
    if len(running) == 1:
        return running[0]
    if not running:
        raise ApiError(404, f"job {job_id} has no running task: name one", place="name")
    shown = "; ".join(t.label() for t in running)
    raise ApiError(422, f"job {job_id} runs several tasks: name one ({shown})", place="name")


async def _rest(root: Path, path: str | None, offset: int) -> AsyncIterator[bytes]:
    """The file from ``offset`` to its end, as it is now."""
    if path is None:
        return
    while chunk := _read(root / path, offset):
        offset += len(chunk)
        yield chunk


async def _follow(
    request: Request,
    app: AppState,
    job_id: int,
    key: str,
    target: LogTarget,
    root: Path,
    offset: int,
) -> AsyncIterator[bytes]:
    """What is written, until its task ends (and all is sent), the client goes or the
    window closes."""
    start = last_check = time.monotonic()
    while time.monotonic() - start < FOLLOW_WINDOW:
        if time.monotonic() - last_check >= RECHECK:
            last_check = time.monotonic()
            # ended is read before the file: what was written before the end is all sent
            try:
                target = await anyio.to_thread.run_sync(_resolve, app, job_id, key)
            except ApiError:  # its file went (pruned): what was sent stands
                return
        chunk = b"" if target.path is None else _read(root / target.path, offset)
        if chunk:
            offset += len(chunk)
            yield chunk
            continue
        if target.ended or await request.is_disconnected():
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
