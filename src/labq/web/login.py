"""Logging in and out, and the reader's own account (where a password is set).

A person logs in with an API token (``labq init`` prints the first one) or with
a user name and password. Either way a new session token is made; see
:mod:`labq.web.session`. Nothing typed here is ever logged.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Final

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import RedirectResponse

from labq.gateway.deps import AppState, StateDep
from labq.store import Repository, reading, transaction
from labq.store.passwords import MAX_PASSWORD
from labq.usecases import notices
from labq.web.rendering import PREFIX, page
from labq.web.route import NoSessionError, PageRoute
from labq.web.session import (
    COOKIE,
    LOGIN_COOKIE,
    FormSessionDep,
    Session,
    SessionDep,
    clear_session_cookie,
    close_session,
    current_session,
    login_nonce,
    login_nonce_matches,
    open_session,
    set_login_cookie,
    set_session_cookie,
)

router = APIRouter(route_class=PageRoute, include_in_schema=False)

HOME: Final = f"{PREFIX}/jobs"
NOTES: Final = {
    "logged-out": "You are logged out.",
    "password": "Your password is set.",
    "webhook-removed": "The webhook was removed.",
}


def safe_next(wanted: str | None) -> str:
    """Where to go after logging in: a page of ours, never another site."""
    if wanted and wanted.startswith(f"{PREFIX}/") and not wanted.startswith("//"):
        return wanted
    return HOME


def _login_page(
    request: Request, *, wanted: str, error: str | None = None, note: str | None = None
) -> Response:
    nonce = login_nonce()
    response = page(
        request,
        "login.html",
        status=401 if error else 200,
        title="Log in",
        wanted=wanted,
        nonce=nonce,
        error=error,
        note=note,
    )
    set_login_cookie(response, request, nonce)
    return response


@router.get("/login")
def login_form(
    request: Request, app: StateDep, next: str | None = None, note: str | None = None
) -> Response:
    """The login form; someone already logged in goes straight on."""
    wanted = safe_next(next)
    if request.cookies.get(COOKIE):
        try:
            current_session(request, app)
        except NoSessionError:
            pass  # an old or revoked session: show the form
        else:
            return RedirectResponse(wanted, status_code=303)
    return _login_page(request, wanted=wanted, note=NOTES.get(note or ""))


@router.post("/login")
def login(
    request: Request,
    app: StateDep,
    nonce: Annotated[str, Form()] = "",
    token: Annotated[str, Form()] = "",
    user: Annotated[str, Form()] = "",
    password: Annotated[str, Form(max_length=MAX_PASSWORD)] = "",
    next: Annotated[str, Form()] = "",
) -> Response:
    """Check a token, or a user name and password, and start a session."""
    wanted = safe_next(next)
    if not login_nonce_matches(request, nonce):
        return _login_page(request, wanted=wanted, error="The login form had expired: try again.")
    now = app.clock()
    with transaction(app.engine) as repo:
        name, error = _who(repo, token.strip(), user, password, now=now)
        secret = None if name is None else open_session(repo, name, now=now)
    if secret is None:
        return _login_page(request, wanted=wanted, error=error)
    response = RedirectResponse(wanted, status_code=303)
    set_session_cookie(response, request, secret)
    response.delete_cookie(LOGIN_COOKIE, path=PREFIX)
    return response


def _who(
    repo: Repository, token: str, user: str, password: str, *, now: datetime
) -> tuple[str | None, str]:
    """The user the token or password speaks for, or None and why not."""
    if token:
        found = repo.tokens.credential(token, now=now)
        if found is None:
            return None, "That token is unknown, expired or revoked."
        if found.recipe_set is not None:
            return None, "A recipe set's own token cannot log in."
        return found.user.name, ""
    if user and password:
        if repo.passwords.check_password(user, password):
            return user, ""
        return None, "Wrong user name or password (or that user has no password)."
    return None, "Give a token, or a user name and a password."


@router.post("/logout")
def logout(session: FormSessionDep, app: StateDep) -> Response:
    """End the session: its token is revoked and the cookie dropped."""
    with transaction(app.engine) as repo:
        close_session(repo, session, now=app.clock())
    response = RedirectResponse(f"{PREFIX}/login?note=logged-out", status_code=303)
    clear_session_cookie(response)
    return response


@router.get("/account")
def account(
    request: Request, session: SessionDep, app: StateDep, note: str | None = None
) -> Response:
    """Who you are, your groups, your tokens and webhooks, and a form to set your password."""
    return account_page(request, app, session, note=NOTES.get(note or ""))


def account_page(
    request: Request,
    app: AppState,
    session: Session,
    *,
    status: int = 200,
    error: str | None = None,
    note: str | None = None,
    secret: str | None = None,
) -> Response:
    """The account page; ``secret`` is a new webhook's, shown this once."""
    with reading(app.engine) as repo:
        tokens = repo.tokens.list_tokens(session.user.name)
        hooks = notices.visible_webhooks(repo, session.user)
    return page(
        request,
        "account.html",
        status=status,
        title="Account",
        tokens=tokens,
        webhooks=hooks,
        now=app.clock(),
        error=error,
        note=note,
        secret=secret,
    )


@router.post("/account/password")
def set_password(
    request: Request,
    session: FormSessionDep,
    app: StateDep,
    password: Annotated[str, Form(max_length=MAX_PASSWORD)] = "",
    again: Annotated[str, Form(max_length=MAX_PASSWORD)] = "",
) -> Response:
    """Set your own password, for logging in without a token.

    No current password is asked for: whoever holds the session may already
    make API tokens for this user, which is as much power.
    """
    if not password or password != again:
        return account_page(
            request, app, session, status=422, error="Type the same, non-empty password twice."
        )
    with transaction(app.engine) as repo:
        repo.passwords.set_password(
            session.user.name, password, actor=session.user.name, now=app.clock()
        )
    return RedirectResponse(f"{PREFIX}/account?note=password", status_code=303)
