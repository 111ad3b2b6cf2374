"""``/jobs/{id}/logs/tail``: one log file by any name for it, followed as it is written.

The answer is plain text sent in chunks (HTTP/1.1 chunked transfer) from byte
``offset`` on; :mod:`labq.usecases.logtail` says when a followed answer ends.
``X-Labq-Log-Ended: true`` says that nothing more will come.
"""

from __future__ import annotations

from typing import Annotated, Final

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import Field

from labq.api.openapi import answers
from labq.gateway.deps import StateDep, UserDep
from labq.gateway.schemas import INTEGRAL, RowId
from labq.usecases import logtail

router = APIRouter(prefix="/jobs", tags=["jobs"])

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
    tail = await logtail.tail_log(
        app.engine,
        app.settings.data_path(),
        job_id,
        name,
        offset,
        follow=follow,
        disconnected=request.is_disconnected,
    )
    return StreamingResponse(tail.body, media_type=PLAIN, headers=tail.headers())
