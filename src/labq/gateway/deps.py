"""What handlers depend on, as ``Annotated`` aliases: the app's state, the clock, the caller.

Nothing here is made at import time: :func:`labq.api.app.create_app` puts one
:class:`AppState` on the app, and every dependency reads it from the request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated

from fastapi import Depends, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import Engine

from labq.config import Settings
from labq.domain.model import User
from labq.gateway.auth import caller
from labq.gateway.errors import ApiError
from labq.gateway.gate import DocumentGate
from labq.store import Credential
from labq.usecases.permissions import require_admin
from labq.usecases.ports import SchedulerPort, WorkBell

Clock = Callable[[], datetime]
# auto_error=False: missing tokens get our own 401 (with WWW-Authenticate), not FastAPI's.
bearer = HTTPBearer(auto_error=False, description="an API token: `Authorization: Bearer lq_…`")


@dataclass(frozen=True)
class AppState:
    """Everything a request may need, made once per app."""

    engine: Engine
    settings: Settings
    events: SchedulerPort  # where events go after a commit, and the queue the scheduler sees
    clock: Clock
    bell: WorkBell = field(default_factory=WorkBell)  # rung when sets start for lab agents
    documents: DocumentGate = field(default_factory=DocumentGate)  # large ones parsed in turn


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


def strict_query(request: Request) -> None:
    """422 for a query parameter the route does not take, or one given twice: as a JSON
    body's unknown field is an error, so is a query's (a typo never passes unnoticed)."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    taken = {p.alias for d in dependants(route.dependant) for p in d.query_params}
    seen: set[str] = set()
    for name, _ in request.query_params.multi_items():
        if name not in taken:
            raise ApiError(422, f"unknown query parameter {name!r}", place=name)
        if name in seen:
            raise ApiError(422, f"query parameter {name!r} is given more than once", place=name)
        seen.add(name)


def dependants(dependant: Dependant) -> Iterator[Dependant]:
    """A route's dependant and everything it depends on, recursively."""
    yield dependant
    for sub in dependant.dependencies:
        yield from dependants(sub)
