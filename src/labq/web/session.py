"""Web sessions: an API token of their own in an HttpOnly, SameSite=Strict cookie.

Logging in (with a token or a user name and password) makes a fresh token named
``web session`` that expires after :data:`LIFETIME`; its secret is the cookie, so
a session is checked exactly as the API checks a token (and works the same on
every server sharing the database), and logging out revokes it. The token a
person logs in with never goes into a cookie.

Forms that change things carry a CSRF token derived from the session's secret
(an HMAC), which a page of another site cannot read or compute; the login form
itself is tied to a random nonce in a short-lived cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Final

from fastapi import Depends, Form, Request, Response

from labq.domain.model import User
from labq.gateway.deps import StateDep
from labq.gateway.errors import ApiError
from labq.store import Repository, transaction
from labq.web.rendering import PREFIX
from labq.web.route import NoSessionError

COOKIE: Final = "labq_session"
LOGIN_COOKIE: Final = "labq_login"
SESSION_TOKEN: Final = "web session"  # noqa: S105 - the name sessions' tokens get, no secret
LIFETIME: Final = timedelta(hours=12)
LOGIN_NONCE_LIFETIME: Final = timedelta(hours=1)
STALE_FORM: Final = (
    "this form has expired or did not come from this site: reload the page and try again"
)


@dataclass(frozen=True)
class Session:
    """Who is logged in, the token that is their session, and their forms' CSRF token."""

    user: User
    token_id: int
    csrf: str


def csrf_of(secret: str) -> str:
    """The CSRF token of the session whose cookie is ``secret``."""
    return hmac.new(secret.encode(), b"labq web form", hashlib.sha256).hexdigest()


def current_session(request: Request, app: StateDep) -> Session:
    """The session of the request's cookie; :class:`NoSessionError` without a valid one.

    Checked like an API token, in its own short transaction (it may record
    ``last_used_at``). A recipe set's token is no session.
    """
    secret = request.cookies.get(COOKIE)
    if not secret:
        raise NoSessionError
    with transaction(app.engine) as repo:
        found = repo.tokens.credential(secret, now=app.clock())
    if found is None or found.recipe_set is not None:
        raise NoSessionError
    session = Session(found.user, found.token_id, csrf_of(secret))
    request.state.session = session  # for the layout, and for error pages
    return session


SessionDep = Annotated[Session, Depends(current_session)]


def checked_form(session: SessionDep, csrf: Annotated[str, Form()] = "") -> Session:
    """The session of a form that changes something, whose CSRF token must match (403)."""
    if not hmac.compare_digest(csrf.encode(), session.csrf.encode()):
        raise ApiError(403, STALE_FORM)
    return session


FormSessionDep = Annotated[Session, Depends(checked_form)]


def open_session(repo: Repository, user: str, *, now: datetime) -> str:
    """A new session token for ``user``; returns its secret, which only the cookie keeps."""
    _, secret = repo.tokens.create_token(user, SESSION_TOKEN, now=now, expires_at=now + LIFETIME)
    return secret


def close_session(repo: Repository, session: Session, *, now: datetime) -> None:
    """Revoke the session's token (only if it is a session token: never an API token)."""
    for token in repo.tokens.list_tokens(session.user.name):
        if token.id == session.token_id and token.name == SESSION_TOKEN:
            repo.tokens.revoke_token(token.id, actor=session.user.name, now=now)


def set_session_cookie(response: Response, request: Request, secret: str) -> None:
    """Put the session in its cookie: HttpOnly, SameSite=Strict, only for the pages."""
    response.set_cookie(
        COOKIE,
        secret,
        max_age=int(LIFETIME.total_seconds()),
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def clear_session_cookie(response: Response) -> None:
    """Forget the session in the browser."""
    response.delete_cookie(COOKIE, path=PREFIX, httponly=True, samesite="strict")


def login_nonce() -> str:
    """A fresh random nonce for one login form."""
    return secrets.token_urlsafe(24)


def set_login_cookie(response: Response, request: Request, nonce: str) -> None:
    """Keep the login form's nonce in its own short-lived cookie."""
    response.set_cookie(
        LOGIN_COOKIE,
        nonce,
        max_age=int(LOGIN_NONCE_LIFETIME.total_seconds()),
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def login_nonce_matches(request: Request, sent: str) -> bool:
    """Whether the login form's nonce is the one its cookie holds."""
    kept = request.cookies.get(LOGIN_COOKIE, "")
    return bool(kept) and hmac.compare_digest(kept.encode(), sent.encode())
