"""``/health``: is the API up and its database reachable? No token needed."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from labq.api.openapi import answers
from labq.gateway.deps import StateDep
from labq.gateway.errors import ApiError
from labq.store import reading

router = APIRouter(tags=["health"])
log = logging.getLogger("labq.api")


@router.get("/health", responses=answers(503))
def health(state: StateDep) -> dict[str, Any]:
    """``ok`` when the database answers; 503 when it does not.

    ``scheduler`` says whether this server schedules (``leader``) or only serves
    the API (``standby``), when its events object knows.
    """
    try:
        with reading(state.engine) as repo:
            repo.conn.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        log.warning("health: database unreachable: %s", type(exc).__name__)
        raise ApiError(503, "the database does not answer") from None
    body: dict[str, Any] = {"status": "ok", "database": "ok"}
    role = getattr(state.events, "role", None)
    if callable(role):
        body["scheduler"] = role()
    return body
