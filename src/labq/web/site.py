"""The web UI put together: every page router under ``/ui``, the static files, and ``/``."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

from labq.web import (
    agents,
    distros,
    job_actions,
    job_verbs,
    jobs,
    labs,
    login,
    queue,
    reports,
    runs,
    system_verbs,
    systems,
    trends,
    usage,
    webhooks,
    whatif,
)
from labq.web.rendering import PREFIX, STATIC


def install(app: FastAPI) -> None:
    """Serve the pages from ``app``; ``/`` and ``/ui/`` lead to the jobs list."""
    for router in (
        login.router,
        webhooks.router,
        reports.router,  # before jobs: /jobs/{id}/logs/follow
        jobs.router,
        job_actions.router,
        job_verbs.router,
        runs.router,
        systems.router,
        system_verbs.router,
        queue.router,
        labs.router,
        distros.router,
        agents.router,
        usage.router,
        whatif.router,
        trends.router,
    ):
        app.include_router(router, prefix=PREFIX)
    app.mount(f"{PREFIX}/static", StaticFiles(directory=STATIC), name="static")

    def root() -> RedirectResponse:
        """The pages."""
        return RedirectResponse(f"{PREFIX}/", status_code=307)

    def home() -> RedirectResponse:
        """The jobs list (the login page first, for someone not logged in)."""
        return RedirectResponse(f"{PREFIX}/jobs", status_code=307)

    app.add_api_route("/", root, methods=["GET"], include_in_schema=False)
    for path in (PREFIX, f"{PREFIX}/"):
        app.add_api_route(path, home, methods=["GET"], include_in_schema=False)
