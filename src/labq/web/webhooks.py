"""The account page's webhooks: add one (its secret shown once) and remove one.

Each calls the use case behind ``POST /webhooks`` and ``DELETE /webhooks/{id}``,
so who may add or remove which webhook is exactly the API's rule. A refusal
comes back as the account page with the API's message and status.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import RedirectResponse

from labq.domain.notices import MAX_URL
from labq.gateway.bodies import WebhookBody
from labq.gateway.deps import StateDep
from labq.gateway.schemas import RowId
from labq.store import transaction
from labq.usecases import notices
from labq.web.login import account_page
from labq.web.rendering import PREFIX
from labq.web.route import PageRoute, form_body, refusal
from labq.web.session import FormSessionDep

router = APIRouter(route_class=PageRoute, include_in_schema=False)


@router.post("/account/webhooks")
def add(
    request: Request,
    app: StateDep,
    session: FormSessionDep,
    url: Annotated[str, Form(min_length=1, max_length=MAX_URL)],
) -> Response:
    """Add a webhook for the reader's own jobs; the page shows its secret this once."""
    try:
        body = form_body(WebhookBody, {"url": url})
        with transaction(app.engine) as repo:
            hook, secret = notices.add_webhook(repo, session.user, body.url, now=app.clock())
    except Exception as exc:
        failure = refusal(exc)
        if failure is None:
            raise
        return account_page(request, app, session, status=failure.status, error=failure.message)
    # A page, not a redirect: the secret must not travel in a URL, and is never shown again.
    note = f"Webhook {hook.id} added. Its signing secret is below; it is not shown again."
    return account_page(request, app, session, note=note, secret=secret)


@router.post("/account/webhooks/{hook_id}/remove")
def remove(request: Request, hook_id: RowId, app: StateDep, session: FormSessionDep) -> Response:
    """Remove a webhook the reader may manage (their own, their group's; admins: any)."""
    try:
        with transaction(app.engine) as repo:
            notices.remove_webhook(repo, session.user, hook_id, now=app.clock())
    except Exception as exc:
        failure = refusal(exc)
        if failure is None:
            raise
        return account_page(request, app, session, status=failure.status, error=failure.message)
    return RedirectResponse(f"{PREFIX}/account?note=webhook-removed", status_code=303)
