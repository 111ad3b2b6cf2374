"""``/agent``: what lab agents call — hello, claim (a long poll), beat, report, logs, end, locks.

An agent authenticates with its own token (``lqa_…``, made by an admin with
``labq agent-token add``), which is good for these calls only and only for sets
of the labs it names; every call about a set is also guarded by the set's
claim (in the body, or the ``X-Labq-Claim`` header — never in a URL, which
access logs keep). ``docs/operations.md`` (Lab agents) has the protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import Annotated, Any, Final

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import Field

from labq.api.openapi import answers
from labq.dispatch import remote
from labq.dispatch.logs import set_log_dir
from labq.domain.events import LocksChanged, SetEnded
from labq.errors import ClaimLost
from labq.gateway.deps import StateDep, bearer
from labq.gateway.errors import BEARER, ApiError, error_body
from labq.gateway.schemas import INTEGRAL, Body, Name, Offset, RowId
from labq.store import reading, transaction
from labq.store.agents import AgentView
from labq.store.supervisors import Beat
from labq.usecases.posting import post_all

router = APIRouter(prefix="/agent", tags=["agent"], responses=answers(401))
MAX_WAIT: Final = 30.0  # seconds a claim may wait for work
POLL_EVERY: Final = 1.0  # a waiting claim looks again this often (work started elsewhere)
MAX_CHUNK: Final = 256 * 1024  # bytes of log in one upload
Claim = Annotated[str, Field(min_length=1, max_length=64)]


def agent(
    state: StateDep,
    token: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> AgentView:
    """The calling agent (401 without a valid, unrevoked agent token)."""
    if token is None or token.scheme.lower() != "bearer" or not token.credentials:
        raise ApiError(
            401, "this needs an agent token (Authorization: Bearer lqa_…)", headers=BEARER
        )
    with reading(state.engine) as repo:
        found = repo.agents.agent_by_secret(token.credentials)
    if found is None:
        raise ApiError(401, "the agent token is unknown or revoked", headers=BEARER)
    return found


AgentDep = Annotated[AgentView, Depends(agent)]


class HelloBody(Body):
    """Who the agent is."""

    version: Name
    host: Name
    max_sets: Annotated[int, Field(ge=0, le=100_000), INTEGRAL] = 0


class ClaimBody(Body):
    """How many sets the agent can take now, how long it may wait for one, and (when it
    serves only some of its token's labs: ``labq agent --lab``) of which labs."""

    max: Annotated[int, Field(ge=0, le=1000), INTEGRAL]
    wait: Annotated[float, Field(ge=0, le=MAX_WAIT)] = 0.0
    labs: Annotated[list[Name], Field(max_length=1000)] | None = None


class BeatSet(Body):
    """A set the agent runs, by its claim."""

    set: Annotated[int, Field(ge=1), INTEGRAL]
    claim: Claim


class BeatBody(Body):
    """Every set the agent runs; how many it runs."""

    sets: Annotated[list[BeatSet], Field(max_length=10_000)] = Field(default_factory=list)
    running: Annotated[int, Field(ge=0, le=100_000), INTEGRAL] = 0


class ReportBody(Body):
    """Numbered reports of one set's supervisor (``docs/operations.md``)."""

    claim: Claim
    events: Annotated[list[dict[str, Any]], Field(max_length=remote.MAX_EVENTS)]


class EndBody(Body):
    """The agent's supervisor of the set exited with ``code`` (None: unknown)."""

    claim: Claim
    code: Annotated[int, Field(ge=-255, le=255), INTEGRAL] | None = None


class ClaimOnly(Body):
    """The set's claim."""

    claim: Claim


def lost(exc: ClaimLost) -> JSONResponse:
    """409, saying the set is no longer the agent's: it must stop and report nothing more."""
    return JSONResponse({**error_body(409, str(exc)), "lost": True}, status_code=409)


@router.post("/hello")
def hello(state: StateDep, me: AgentDep, body: HelloBody) -> dict[str, Any]:
    """The agent starts: it is recorded, and told its labs and the heartbeat settings."""
    with transaction(state.engine) as repo:
        repo.agents.agent_seen(
            me.id, now=state.clock(), version=body.version, host=body.host, max_sets=body.max_sets
        )
    health = state.settings.health
    return {
        "name": me.name,
        "labs": list(me.labs),
        "heartbeat_every": state.settings.heartbeat_every,
        "heartbeat_timeout": health.heartbeat_timeout,
        "lease": health.heartbeat_timeout / 2,
    }


@router.post("/claim")
async def claim(request: Request, state: StateDep, me: AgentDep, body: ClaimBody) -> dict[str, Any]:
    """Claim up to ``max`` started sets of the agent's labs, waiting up to ``wait`` seconds
    for one; each set is claimed by exactly one taker."""
    deadline = time.monotonic() + body.wait
    bell = state.bell
    while True:
        with bell.listening(me.labs) as rung:
            work = await run_in_threadpool(
                remote.claim_work,
                state.engine,
                me,
                limit=body.max,
                now=state.clock(),
                labs=None if body.labs is None else set(body.labs),
            )
            left = deadline - time.monotonic()
            if work or left <= 0 or body.max == 0 or await request.is_disconnected():
                return {"sets": [w.as_json() for w in work]}
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(rung.wait(), timeout=min(POLL_EVERY, left))


@router.post("/beat")
def beat(state: StateDep, me: AgentDep, body: BeatBody) -> dict[str, Any]:
    """The agent is alive, and so is each set it names: each is told carry on, stop or lost."""
    now = state.clock()
    with transaction(state.engine) as repo:
        repo.agents.agent_seen(me.id, now=now, running=body.running)
        told = repo.agents.agent_beat(me.id, [(s.set, s.claim) for s in body.sets], now=now)
        alive = [k for k, v in told.items() if v is not Beat.LOST]
        deadlines = repo.agents.deadlines(me.id, alive)
    return {
        "sets": {str(k): v.value for k, v in told.items()},
        "deadlines": {str(k): v for k, v in deadlines.items()},
    }


@router.post("/sets/{set_id}/report", responses=answers(409, 422))
def report(state: StateDep, me: AgentDep, set_id: RowId, body: ReportBody) -> Any:
    """Apply the set's numbered reports; answers the number of the last one applied."""
    try:
        applied = remote.apply_reports(
            state.engine,
            me,
            set_id,
            body.claim,
            body.events,
            now=state.clock(),
            data_dir=state.settings.data_path(),
        )
    except ClaimLost as exc:
        return lost(exc)
    return {"applied": applied}


@router.put("/sets/{set_id}/logs", responses=answers(403, 409, 413, 422))
async def upload_log(
    request: Request,
    state: StateDep,
    me: AgentDep,
    set_id: RowId,
    path: Annotated[str, Query(min_length=1, max_length=1024)],
    offset: Annotated[Offset, Query()],
    x_labq_claim: Annotated[str, Header(min_length=1, max_length=64)],
) -> Any:
    """Append to one of the set's log files from ``offset``: what the server has already is
    kept (a retried chunk), a gap is refused with the size it has (409)."""
    chunk = await request.body()
    if len(chunk) > MAX_CHUNK:
        raise ApiError(413, f"a log chunk is at most {MAX_CHUNK} bytes", place="body")
    rel = remote.relative_log(path)
    with reading(state.engine) as repo:
        if not repo.agents.owns_set(set_id, x_labq_claim, me.id):
            raise ApiError(403, f"recipe set {set_id} is not this agent's under that claim")
    target = set_log_dir(state.settings.data_path(), set_id) / rel
    size = await run_in_threadpool(append_at, target, offset, chunk)
    if size < offset:
        return JSONResponse({**error_body(409, f"the server has {size} bytes"), "size": size}, 409)
    return {"size": size}


def append_at(path: Path, offset: int, chunk: bytes) -> int:
    """Write ``chunk`` at ``offset`` of an append-only file, keeping what is there already;
    the file's size after (less than ``offset``: a gap, nothing written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if offset > size:
            return size
        new = chunk[size - offset :]
        if new:
            os.write(fd, new)
        return size + len(new)
    finally:
        os.close(fd)


@router.post("/sets/{set_id}/ended", responses=answers(409))
def ended(state: StateDep, me: AgentDep, set_id: RowId, body: EndBody) -> Any:
    """The set's supervisor exited and every report and log got through."""
    if not remote.end_set(state.engine, me, set_id, body.claim, body.code, now=state.clock()):
        return lost(ClaimLost(f"recipe set {set_id} is not this agent's under that claim"))
    post_all(state.events, [SetEnded(set_id)])
    return {"ended": True}


@router.post("/sets/{set_id}/locks", responses=answers(409))
def locks(state: StateDep, me: AgentDep, set_id: RowId, body: ClaimOnly) -> Any:
    """Take the set's declared locks, all or none (ask again until granted)."""
    try:
        outcome = remote.take_locks(state.engine, me, set_id, body.claim, now=state.clock())
    except ClaimLost as exc:
        return lost(exc)
    if outcome.granted:
        post_all(state.events, [LocksChanged(set_id)])
    return {"granted": outcome.granted, "refused": outcome.refused, "waiting": outcome.describe()}
