"""The system page's forms: reserve, release, loan (admins) and remove (admins).

Each calls the same use case as the API, so permissions, checks and the event told
to the scheduler are exactly the API's. A refusal comes back as the system's page
with the API's message and status.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Final

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import RedirectResponse

from labq.domain.reservesys import MAX_SECONDS
from labq.gateway.bodies import LoanBody, RemoveBody, ReserveBody
from labq.gateway.deps import AppState, StateDep
from labq.gateway.posting import committing
from labq.usecases import reservations, systems
from labq.usecases.submission import submit_job
from labq.web.job_actions import REASON_LIMIT
from labq.web.rendering import PREFIX
from labq.web.route import PageRoute, refusal
from labq.web.session import FormSessionDep, Session
from labq.web.systems import system_page

router = APIRouter(route_class=PageRoute, include_in_schema=False)

MAX_HOURS: Final = MAX_SECONDS / 3600
Hours = Annotated[float, Form(gt=0, le=MAX_HOURS)]


def _seconds(hours: float) -> int:
    """Whole seconds, at least one (the API counts in seconds)."""
    return max(1, round(hours * 3600))


def _act(
    request: Request,
    app: AppState,
    session: Session,
    fqdn: str,
    action: Callable[[], str],
) -> Response:
    """Run the use case, which says the note; on to the system's page with that note, or
    back with the refusal."""
    try:
        note = action()
    except Exception as exc:
        failure = refusal(exc)
        if failure is None:
            raise
        return system_page(
            request, app, session, fqdn, status=failure.status, error=failure.message
        )
    return RedirectResponse(f"{PREFIX}/systems/{fqdn}?note={note}", status_code=303)


@router.post("/systems/{fqdn}/reserve")
def reserve(
    request: Request, fqdn: str, app: StateDep, session: FormSessionDep, hours: Hours
) -> Response:
    """Queue a reservation of the system for the reader, kept ``hours`` once it runs."""
    body = ReserveBody.model_validate({"for": _seconds(hours)})

    def act() -> str:
        submit = functools.partial(submit_job, fmt="native", now=app.clock())
        with committing(app) as (repo, sink):
            reservations.reserve_system(
                repo, session.user, fqdn, body.seconds, submit=submit, sink=sink
            )
        return "reserved"

    return _act(request, app, session, fqdn, act)


@router.post("/systems/{fqdn}/release")
def release(request: Request, fqdn: str, app: StateDep, session: FormSessionDep) -> Response:
    """End the system's reservation or loan (its holder or an admin)."""

    def act() -> str:
        with committing(app) as (repo, sink):
            reservations.release_system(repo, session.user, fqdn, now=app.clock(), sink=sink)
        return "released"

    return _act(request, app, session, fqdn, act)


@router.post("/systems/{fqdn}/loan")
def loan(
    request: Request,
    fqdn: str,
    app: StateDep,
    session: FormSessionDep,
    to: Annotated[str, Form(min_length=1, max_length=255)],
    hours: Annotated[float | None, Form(gt=0, le=MAX_HOURS)] = None,
    reason: Annotated[str, Form(max_length=REASON_LIMIT)] = "",
) -> Response:
    """Loan the system to a user now, for ``hours`` or until released (admins)."""
    body = LoanBody.model_validate(
        {
            "to": to.strip(),
            "for": None if hours is None else _seconds(hours),
            "reason": reason.strip() or None,
        }
    )

    def act() -> str:
        with committing(app) as (repo, sink):
            reservations.loan_system(
                repo,
                session.user,
                fqdn,
                body.to,
                seconds=body.seconds,
                reason=body.reason,
                now=app.clock(),
                sink=sink,
            )
        return "loaned"

    return _act(request, app, session, fqdn, act)


@router.post("/systems/{fqdn}/remove")
def remove(
    request: Request,
    fqdn: str,
    app: StateDep,
    session: FormSessionDep,
    force: Annotated[bool, Form()] = False,
    reason: Annotated[str, Form(max_length=REASON_LIMIT)] = "",
) -> Response:
    """Take the system out of service (admins); ``force`` aborts the recipe it serves."""
    body = RemoveBody(force=force, reason=reason.strip() or None)

    def act() -> str:
        with committing(app) as (repo, sink):
            _, done = systems.remove_system(
                repo,
                session.user,
                fqdn,
                force=body.force,
                reason=body.reason,
                now=app.clock(),
                sink=sink,
            )
        return "removed" if done.changed else "already-removed"

    return _act(request, app, session, fqdn, act)
