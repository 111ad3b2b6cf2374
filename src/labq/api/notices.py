"""``/webhooks`` (a user's or a group's job ends, POSTed and signed) and
``/jobs/{id}/notifications`` (what a job's end sent, and what failed).

A webhook's secret is in the answer that creates it and never again. A user's
webhook is its own user's (or an admin's) to add and remove; a group's, its
members' (``everybody``'s: admins only).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import Field

from labq.api.deps import StateDep, UserDep
from labq.api.errors import ApiError
from labq.api.openapi import answers
from labq.api.schemas import NO_NUL, Body, Name, RowId
from labq.domain.model import EVERYBODY, User
from labq.domain.notices import MAX_URL, check_url, new_secret
from labq.store import reading, transaction
from labq.store.notices import NotificationView, WebhookView
from labq.usecases.permissions import may_change_job

router = APIRouter(tags=["notifications"])

Url = Annotated[str, Field(min_length=1, max_length=MAX_URL), NO_NUL]


class WebhookBody(Body):
    """Where to POST job ends: the caller's own jobs unless ``user`` or ``group`` says whose."""

    url: Url
    user: Name | None = None
    group: Name | None = None


def may_manage(caller: User, user: str | None, group: str | None) -> bool:
    """Whether ``caller`` may add or remove a webhook of ``user`` or ``group``."""
    if caller.admin:
        return True
    if user is not None:
        return user == caller.name
    return group is not None and group != EVERYBODY and group in caller.groups


def webhook_json(hook: WebhookView) -> dict[str, Any]:
    """A webhook as the API shows it (never its secret)."""
    return {
        "id": hook.id,
        "url": hook.url,
        "user": hook.user,
        "group": hook.group,
        "created_by": hook.created_by,
        "created_at": hook.created_at,
    }


def notification_json(item: NotificationView) -> dict[str, Any]:
    """One notification of a job."""
    return {
        "id": item.id,
        "kind": item.kind,
        "target": item.target,
        "state": item.state,
        "attempts": item.attempts,
        "next_at": item.next_at if item.state == "pending" else None,
        "last_error": item.last_error,
        "created_at": item.created_at,
        "sent_at": item.sent_at,
    }


@router.post("/webhooks", status_code=201, responses=answers(403, 404, 422))
def add_webhook(body: WebhookBody, app: StateDep, caller: UserDep) -> dict[str, Any]:
    """Add a webhook; the answer holds its signing secret, shown this once."""
    if body.user is not None and body.group is not None:
        raise ApiError(422, "a webhook is a user's or a group's, not both", place="group")
    user = body.user if body.user is not None or body.group is not None else caller.name
    if not may_manage(caller, user, body.group):
        whose = f"user {user!r}" if user is not None else f"group {body.group!r}"
        raise ApiError(403, f"{caller.name!r} may not add a webhook for {whose}")
    url = check_url(body.url)
    secret = new_secret()
    with transaction(app.engine) as repo:
        hook_id = repo.notices.add_webhook(
            url, secret, user=user, group=body.group, actor=caller.name, now=app.clock()
        )
        hook = repo.notices.get_webhook(hook_id)
    return {**webhook_json(hook), "secret": secret}


@router.get("/webhooks")
def list_webhooks(app: StateDep, caller: UserDep) -> dict[str, Any]:
    """The caller's webhooks and its groups' (an admin's: every one)."""
    with reading(app.engine) as repo:
        hooks = repo.notices.list_webhooks()
    mine = [h for h in hooks if may_manage(caller, h.user, h.group)]
    return {"webhooks": [webhook_json(h) for h in mine]}


@router.delete("/webhooks/{hook_id}", responses=answers(403, 404))
def remove_webhook(hook_id: RowId, app: StateDep, caller: UserDep) -> dict[str, Any]:
    """Remove a webhook; notifications still owed to it fail."""
    with transaction(app.engine) as repo:
        hook = repo.notices.get_webhook(hook_id)
        if not may_manage(caller, hook.user, hook.group):
            raise ApiError(403, f"{caller.name!r} may not remove webhook {hook_id}")
        repo.notices.remove_webhook(hook_id, actor=caller.name, now=app.clock())
    return {"id": hook_id, "removed": True}


@router.get("/jobs/{job_id}/notifications", responses=answers(403, 404))
def job_notifications(job_id: RowId, app: StateDep, caller: UserDep) -> dict[str, Any]:
    """What the job's end sent: each email and webhook POST, its state, tries and last error
    (the owner, its group's members and admins)."""
    with reading(app.engine) as repo:
        job = repo.jobs.load_job(job_id)
        if not may_change_job(caller, job):
            raise ApiError(403, f"job {job_id} is not {caller.name!r}'s to read notifications of")
        items = repo.notices.job_notifications(job_id)
    return {"id": job_id, "notifications": [notification_json(i) for i in items]}
