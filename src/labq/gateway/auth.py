"""Who is calling, and what they may do.

Everyone authenticated may read. Admins change labs, systems, pools, rules,
users and groups. A job may be cancelled or re-prioritised by its owner, by a
member of its group (``everybody`` does not count: it would be everyone) and by
admins; raising a priority needs an admin. A recipe set's own token may read,
and take and release locks for its set (its tasks do, through ``labq lock``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from fastapi.security import HTTPAuthorizationCredentials
from sqlalchemy import Engine

from labq.gateway.errors import BEARER, ApiError
from labq.store import Credential, transaction

READ_METHODS: Final = frozenset({"GET", "HEAD"})
SET_TOKEN_WRITES: Final = ("/api/v1/locks/",)  # what a set's own token may change


def caller(
    engine: Engine,
    token: HTTPAuthorizationCredentials | None,
    *,
    method: str,
    now: datetime,
    path: str = "",
) -> Credential:
    """The credential of a bearer token; 401 when missing or not valid, 403 for set tokens.

    Checked in its own short transaction: it may record ``last_used_at``.
    """
    if token is None or token.scheme.lower() != "bearer" or not token.credentials:
        raise ApiError(401, "this needs an API token (Authorization: Bearer …)", headers=BEARER)
    with transaction(engine) as repo:
        found = repo.tokens.credential(token.credentials, now=now)
    if found is None:
        raise ApiError(401, "the token is unknown, expired or revoked", headers=BEARER)
    if (
        found.recipe_set is not None
        and method not in READ_METHODS
        and not path.startswith(SET_TOKEN_WRITES)
    ):
        raise ApiError(403, "a recipe set's token may only read, and take or release its locks")
    return found
