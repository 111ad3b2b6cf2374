"""``/webhooks`` (a user's or a group's job ends, POSTed and signed) and
``/jobs/{id}/notifications`` (what a job's end sent, and what failed).

A webhook's secret is in the answer that creates it and never again. A user's
webhook is its own user's (or an admin's) to add and remove; a group's, its
members' (``everybody``'s: admins only).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from labq.api.openapi import answers
from labq.gateway.bodies import WebhookBody
from labq.gateway.deps import StateDep, UserDep
from labq.gateway.schemas import RowId
from labq.store import reading, transaction
from labq.store.notices import NotificationView, WebhookView
from labq.usecases import notices

router = APIRouter(tags=["notifications"])


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
    with transaction(app.engine) as repo:
        hook, secret = notices.add_webhook(
            repo, caller, body.url, user=body.user, group=body.group, now=app.clock()
        )
    return {**webhook_json(hook), "secret": secret}


@router.get("/webhooks")
def list_webhooks(app: StateDep, caller: UserDep) -> dict[str, Any]:
    """The caller's webhooks and its groups' (an admin's: every one)."""
    with reading(app.engine) as repo:
        mine = notices.visible_webhooks(repo, caller)
    return {"webhooks": [webhook_json(h) for h in mine]}


@router.delete("/webhooks/{hook_id}", responses=answers(403, 404))
def remove_webhook(hook_id: RowId, app: StateDep, caller: UserDep) -> dict[str, Any]:
    """Remove a webhook; notifications still owed to it fail."""
    with transaction(app.engine) as repo:
        notices.remove_webhook(repo, caller, hook_id, now=app.clock())
    return {"id": hook_id, "removed": True}


@router.get("/jobs/{job_id}/notifications", responses=answers(403, 404))
def job_notifications(job_id: RowId, app: StateDep, caller: UserDep) -> dict[str, Any]:
    """What the job's end sent: each email and webhook POST, its state, tries and last error
    (the owner, its group's members and admins)."""
    with reading(app.engine) as repo:
        items = notices.job_notifications(repo, caller, job_id)
    return {"id": job_id, "notifications": [notification_json(i) for i in items]}
