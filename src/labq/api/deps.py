"""What handlers depend on, as ``Annotated`` aliases: the app's state, the clock, the caller.

Nothing here is made at import time: :func:`labq.api.app.create_app` puts one
:class:`AppState` on the app, and every dependency reads it from the request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import Engine

from labq.api.auth import caller, require_admin
from labq.api.events import Events
from labq.config import Settings
from labq.domain.model import User
from labq.store import Credential

Clock = Callable[[], datetime]
# auto_error=False: missing tokens get our own 401 (with WWW-Authenticate), not FastAPI's.
bearer = HTTPBearer(auto_error=False, description="an API token: `Authorization: Bearer lq_…`")


@dataclass(frozen=True)
class AppState:
    """Everything a request may need, made once per app."""

    engine: Engine
    settings: Settings
    events: Events
    clock: Clock


def app_state(request: Request) -> AppState:
    """The state :func:`create_app` put on the app."""
    state: AppState = request.app.state.labq
    return state


StateDep = Annotated[AppState, Depends(app_state)]


def credential(
    request: Request,
    state: StateDep,
    token: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Credential:
    """The caller's credential (401 without a valid token)."""
    return caller(
        state.engine, token, method=request.method, now=state.clock(), path=request.url.path
    )


CredentialDep = Annotated[Credential, Depends(credential)]


def user(found: CredentialDep) -> User:
    """The authenticated user."""
    return found.user


UserDep = Annotated[User, Depends(user)]


def admin(found: UserDep) -> User:
    """The authenticated user, who must be an admin (403 otherwise)."""
    require_admin(found)
    return found


AdminDep = Annotated[User, Depends(admin)]
