"""Routes whose failures are pages, not JSON.

The API answers every error as JSON (:mod:`labq.gateway.errors`). A person in a
browser should see the same message on a page instead: :class:`PageRoute` turns
the errors the API's own code raises into an error page with the same status
and words, sends an unauthenticated reader to the login page, and never shows a
traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar
from urllib.parse import quote

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException

from labq.errors import LabqError
from labq.gateway.errors import ApiError, from_labq, validation_error
from labq.web.rendering import PREFIX, page

log = logging.getLogger("labq.web")
# Sent by live.js: a live update that lost its session is told so, not redirected.
LIVE_HEADER = "x-labq-live"

M = TypeVar("M", bound=BaseModel)
Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class NoSessionError(Exception):
    """The request has no valid session: the reader must log in first."""


def refusal(exc: Exception) -> ApiError | None:
    """The API's answer to an error raised by its code; None for anything unexpected."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, LabqError):
        return from_labq(exc)
    if isinstance(exc, RequestValidationError):
        return validation_error(exc.errors())
    if isinstance(exc, HTTPException):
        detail = exc.detail if isinstance(exc.detail, str) else "request refused"
        return ApiError(exc.status_code, detail)
    return None


def form_body(model: type[M], fields: dict[str, Any]) -> M:
    """The API's body from a form's fields; what it refuses is refused as a form (422)."""
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from None


def login_redirect(request: Request) -> Response:
    """To the login page, coming back here afterwards (GET pages only)."""
    if request.headers.get(LIVE_HEADER):
        return Response(status_code=401)
    target = f"{PREFIX}/login"
    if request.method == "GET":
        wanted = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        target += f"?next={quote(wanted, safe='')}"
    return RedirectResponse(target, status_code=303)


class PageRoute(APIRoute):
    """An API route that answers its failures with an HTML page."""

    def get_route_handler(self) -> Handler:
        """The usual handler, wrapped so that errors become pages."""
        handler = super().get_route_handler()

        async def as_page(request: Request) -> Response:
            try:
                return await handler(request)
            except NoSessionError:
                return login_redirect(request)
            except Exception as exc:
                answer = refusal(exc)
                if answer is None:
                    # Logged with the path only: forms and cookies may hold secrets.
                    log.exception("internal error on %s %s", request.method, request.url.path)
                    answer = ApiError(500, "internal error: the server log says more")
                return page(
                    request,
                    "error.html",
                    status=answer.status,
                    title=f"Error {answer.status}",
                    failure=answer,
                )

        return as_page
