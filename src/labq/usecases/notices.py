"""Webhooks (a user's or a group's job ends, POSTed and signed) and what a job's end sent.

A user's webhook is its own user's (or an admin's) to add and remove; a group's, its
members' (``everybody``'s: admins only). A webhook's secret is returned once, when it
is added, and never again.
"""

from __future__ import annotations

from datetime import datetime

from labq.domain.model import EVERYBODY, User
from labq.domain.notices import check_url, new_secret
from labq.errors import ForbiddenError, RequestError
from labq.store import Repository
from labq.store.notices import NotificationView, WebhookView
from labq.usecases.permissions import may_change_job


def may_manage(caller: User, user: str | None, group: str | None) -> bool:
    """Whether ``caller`` may add or remove a webhook of ``user`` or ``group``."""
    if caller.admin:
        return True
    if user is not None:
        return user == caller.name
    return group is not None and group != EVERYBODY and group in caller.groups


def add_webhook(
    repo: Repository,
    caller: User,
    url: str,
    *,
    user: str | None = None,
    group: str | None = None,
    now: datetime,
) -> tuple[WebhookView, str]:
    """Add a webhook for ``user`` or ``group`` (neither: the caller's own jobs); returns it
    and its signing secret."""
    if user is not None and group is not None:
        raise RequestError("a webhook is a user's or a group's, not both", place="group")
    whom = user if user is not None or group is not None else caller.name
    if not may_manage(caller, whom, group):
        whose = f"user {whom!r}" if whom is not None else f"group {group!r}"
        raise ForbiddenError(f"{caller.name!r} may not add a webhook for {whose}")
    checked = check_url(url)
    secret = new_secret()
    hook_id = repo.notices.add_webhook(
        checked, secret, user=whom, group=group, actor=caller.name, now=now
    )
    return repo.notices.get_webhook(hook_id), secret


def visible_webhooks(repo: Repository, caller: User) -> list[WebhookView]:
    """The caller's webhooks and its groups' (an admin's: every one)."""
    return [h for h in repo.notices.list_webhooks() if may_manage(caller, h.user, h.group)]


def remove_webhook(repo: Repository, caller: User, hook_id: int, *, now: datetime) -> None:
    """Remove a webhook the caller may manage; notifications still owed to it fail."""
    hook = repo.notices.get_webhook(hook_id)
    if not may_manage(caller, hook.user, hook.group):
        raise ForbiddenError(f"{caller.name!r} may not remove webhook {hook_id}")
    repo.notices.remove_webhook(hook_id, actor=caller.name, now=now)


def job_notifications(repo: Repository, caller: User, job_id: int) -> list[NotificationView]:
    """What a job's end sent (its owner, its group's members and admins may read it)."""
    job = repo.jobs.load_job(job_id)
    if not may_change_job(caller, job):
        raise ForbiddenError(f"job {job_id} is not {caller.name!r}'s to read notifications of")
    return repo.notices.job_notifications(job_id)
