"""The whole HTTP application ``labq server`` serves: the API with the web UI under ``/ui``.

The API and the UI are sibling adapters that never import each other; this module puts
them together (as :mod:`labq.server` puts the app, the service and the dispatcher).
"""

from __future__ import annotations

from fastapi import FastAPI
from sqlalchemy import Engine

from labq.api import app as api_app
from labq.config import Settings
from labq.gateway.deps import Clock
from labq.usecases.ports import SchedulerPort, WorkBell
from labq.web import site


def create_app(
    engine: Engine,
    settings: Settings,
    events: SchedulerPort,
    *,
    clock: Clock = api_app.utc_now,
    bell: WorkBell | None = None,
) -> FastAPI:
    """The API over ``engine`` (see :func:`labq.api.app.create_app`) and the web UI."""
    return api_app.create_app(engine, settings, events, clock=clock, bell=bell, pages=site.install)
