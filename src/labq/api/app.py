"""The FastAPI application: one router per resource under ``/api/v1``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from fastapi import APIRouter, Depends, FastAPI
from sqlalchemy import Engine

from labq.api import (
    agent,
    agents,
    bulk,
    clones,
    distros,
    extend,
    filters,
    health,
    jobs,
    labs,
    literals,
    locks,
    logtail,
    metrics,
    notices,
    openapi,
    people,
    pools,
    queue,
    reservations,
    retention,
    runs,
    simexport,
    sysinfo,
    sysremove,
    systems,
    usage,
)
from labq.api.guard import Guard
from labq.config import Settings
from labq.gateway import errors
from labq.gateway.deps import AppState, Clock, strict_query
from labq.usecases.ports import SchedulerPort, WorkBell

PREFIX = openapi.PREFIX


def utc_now() -> datetime:
    """The wall clock, in UTC."""
    return datetime.now(UTC)


def create_app(
    engine: Engine,
    settings: Settings,
    events: SchedulerPort,
    *,
    clock: Clock = utc_now,
    bell: WorkBell | None = None,
    pages: Callable[[FastAPI], None] | None = None,
) -> FastAPI:
    """The HTTP API over ``engine``; changes are told to the scheduler through ``events``,
    and ``bell`` (the server's) wakes lab agents waiting for work. ``pages`` mounts more
    routes before the error handlers go in (:mod:`labq.webapp` mounts the web UI so)."""
    app = FastAPI(
        title="labq",
        version="1",
        summary="An event-driven job scheduler for test labs",
        openapi_url="/openapi.json",
    )
    app.state.labq = AppState(
        engine=engine, settings=settings, events=events, clock=clock, bell=bell or WorkBell()
    )
    mounted: list[tuple[str, APIRouter]] = []  # (prefix, router): the document's routes
    for router in (
        health.router,
        labs.router,
        sysinfo.router,  # before systems: /systems/summary is no fqdn
        systems.router,
        reservations.router,
        sysremove.router,
        pools.router,
        distros.router,
        people.users,
        people.groups,
        people.tokens,
        bulk.router,  # before jobs: /jobs/cancel is no job id
        jobs.router,
        logtail.router,
        clones.router,
        extend.router,
        runs.router,
        queue.router,
        locks.router,
        filters.router,
        filters.pauses,
        agents.router,
        agent.router,
        usage.router,
        simexport.router,
        notices.router,
        retention.router,
    ):
        openapi.document_errors(router)
        app.include_router(router, prefix=PREFIX, dependencies=[Depends(strict_query)])
        mounted.append((PREFIX, router))
    app.include_router(metrics.router)  # /metrics at the root, where Prometheus looks
    mounted.append(("", metrics.router))
    if pages is not None:
        pages(app)
    errors.install(app)
    openapi.install(app)
    # 405 on GET /jobs/cancel
    app.add_middleware(literals.LiteralPaths, allowed=literals.allowed_methods(mounted))
    app.add_middleware(Guard, max_body_bytes=settings.limits.document_bytes)
    return app
