"""Who may do what: the checks every use case makes, raising :class:`ForbiddenError`.

Everyone authenticated may read. Admins change labs, systems, pools, rules, users and
groups. A job may be cancelled or re-prioritised by its owner, by a member of its group
(``everybody`` does not count: it would be everyone) and by admins; raising a priority
needs an admin.
"""

from __future__ import annotations

from labq.domain.model import EVERYBODY, User
from labq.errors import ForbiddenError
from labq.store import JobView


def require_admin(user: User) -> None:
    """Refuse unless ``user`` is an admin."""
    if not user.admin:
        raise ForbiddenError(f"only admins may do this, and {user.name!r} is not one")


def may_change_job(user: User, job: JobView) -> bool:
    """The owner, a member of the job's own group, or an admin."""
    if user.admin or job.owner == user.name:
        return True
    return job.group is not None and job.group != EVERYBODY and job.group in user.groups


def require_job_change(user: User, job: JobView) -> None:
    """Refuse unless ``user`` may cancel or re-prioritise ``job``."""
    if not may_change_job(user, job):
        whose = f"{job.owner!r}" + (f" (group {job.group!r})" if job.group else "")
        raise ForbiddenError(f"job {job.id} belongs to {whose}; {user.name!r} may not change it")
