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

from labq.api.errors import BEARER, ApiError
from labq.domain.model import EVERYBODY, User
from labq.store import Credential, JobView, transaction

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
        found = repo.credential(token.credentials, now=now)
    if found is None:
        raise ApiError(401, "the token is unknown, expired or revoked", headers=BEARER)
    if (
        found.recipe_set is not None
        and method not in READ_METHODS
        and not path.startswith(SET_TOKEN_WRITES)
    ):
        raise ApiError(403, "a recipe set's token may only read, and take or release its locks")
    return found


def require_admin(user: User) -> None:
    """403 unless ``user`` is an admin."""
    if not user.admin:
        raise ApiError(403, f"only admins may do this, and {user.name!r} is not one")


def may_change_job(user: User, job: JobView) -> bool:
    """The owner, a member of the job's own group, or an admin."""
    if user.admin or job.owner == user.name:
        return True
    return job.group is not None and job.group != EVERYBODY and job.group in user.groups


def require_job_change(user: User, job: JobView) -> None:
    """403 unless ``user`` may cancel or re-prioritise ``job``."""
    if not may_change_job(user, job):
        whose = f"{job.owner!r}" + (f" (group {job.group!r})" if job.group else "")
        raise ApiError(403, f"job {job.id} belongs to {whose}; {user.name!r} may not change it")
