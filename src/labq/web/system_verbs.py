"""The system page's forms: reserve, release, loan (admins) and remove (admins).

Each calls the API's own handler, so permissions, checks and the event told to
the scheduler are exactly the API's. A refusal comes back as the system's page
with the API's message and status.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Final

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import RedirectResponse

from labq.api import reservations as api_reservations
from labq.api import sysremove as api_sysremove
from labq.domain.reservesys import MAX_SECONDS
from labq.gateway.deps import AppState, StateDep
from labq.gateway.deps import admin as api_admin
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
    action: Callable[[], dict[str, Any]],
    note: Callable[[dict[str, Any]], str],
) -> Response:
    """Run the API's handler; on to the system's page with a note, or back with the refusal."""
    try:
        answer = action()
    except Exception as exc:
        failure = refusal(exc)
        if failure is None:
            raise
        return system_page(
            request, app, session, fqdn, status=failure.status, error=failure.message
        )
    return RedirectResponse(f"{PREFIX}/systems/{fqdn}?note={note(answer)}", status_code=303)


@router.post("/systems/{fqdn}/reserve")
def reserve(
    request: Request, fqdn: str, app: StateDep, session: FormSessionDep, hours: Hours
) -> Response:
    """Queue a reservation of the system for the reader, kept ``hours`` once it runs."""
    body = api_reservations.ReserveBody.model_validate({"for": _seconds(hours)})
    return _act(
        request,
        app,
        session,
        fqdn,
        lambda: api_reservations.reserve_system(fqdn, body, app, session.user),
        lambda _: "reserved",
    )


@router.post("/systems/{fqdn}/release")
def release(request: Request, fqdn: str, app: StateDep, session: FormSessionDep) -> Response:
    """End the system's reservation or loan (its holder or an admin)."""
    return _act(
        request,
        app,
        session,
        fqdn,
        lambda: api_reservations.release_system(fqdn, app, session.user),
        lambda _: "released",
    )


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
    body = api_reservations.LoanBody.model_validate(
        {
            "to": to.strip(),
            "for": None if hours is None else _seconds(hours),
            "reason": reason.strip() or None,
        }
    )
    return _act(
        request,
        app,
        session,
        fqdn,
        lambda: api_reservations.loan_system(fqdn, body, app, api_admin(session.user)),
        lambda _: "loaned",
    )


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
    body = api_sysremove.RemoveBody(force=force, reason=reason.strip() or None)
    return _act(
        request,
        app,
        session,
        fqdn,
        lambda: api_sysremove.remove_system(fqdn, app, api_admin(session.user), body),
        lambda answer: "removed" if answer["changed"] else "already-removed",
    )
