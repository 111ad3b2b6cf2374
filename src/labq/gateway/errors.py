"""Every error the API answers, in one JSON shape: ``{"error": {"status", "message", …}}``.

``message`` says the problem in plain words; ``place`` names the field or the
place in a job document, ``line`` its line when known. A document with several
problems also has ``problems``, each one with its own ``message``, ``place`` and
``line`` (``message`` tells the first and counts the rest). Tracebacks never leave
the server (see :mod:`labq.api.guard`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from labq.errors import (
    ConflictError,
    ForbiddenError,
    IllegalTransition,
    InputError,
    LabqError,
    NotFoundError,
    RequestError,
)

BEARER = {"WWW-Authenticate": "Bearer"}


class ApiError(Exception):
    """An answer other than success, raised anywhere in a request."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        place: str | None = None,
        line: int | None = None,
        headers: Mapping[str, str] | None = None,
        problems: Sequence[Mapping[str, Any]] = (),
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.place = place
        self.line = line
        self.headers = dict(headers or {})
        self.problems = [dict(p) for p in problems]


def error_body(
    status: int,
    message: str,
    *,
    place: str | None = None,
    line: int | None = None,
    problems: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The JSON every error answer carries; ``problems``: each one when there are several."""
    error: dict[str, Any] = {"status": status, "message": message}
    if place:
        error["place"] = place
    if line is not None:
        error["line"] = line
    if problems:
        error["problems"] = [dict(p) for p in problems]
    return {"error": error}


def error_response(error: ApiError) -> JSONResponse:
    """An :class:`ApiError` as a response."""
    body = error_body(
        error.status, error.message, place=error.place, line=error.line, problems=error.problems
    )
    return JSONResponse(body, status_code=error.status, headers=error.headers)


def from_labq(exc: LabqError) -> ApiError:
    """A repository or parser error as the answer it deserves."""
    if isinstance(exc, InputError):
        problems = [_problem(e) for e in exc.every]
        return ApiError(
            422, exc.describe(), place=exc.place or None, line=exc.line, problems=problems
        )
    place = exc.place or None
    if isinstance(exc, RequestError):
        return ApiError(422, str(exc), place=place)
    if isinstance(exc, NotFoundError):
        return ApiError(404, str(exc), place=place)
    if isinstance(exc, ForbiddenError):
        return ApiError(403, str(exc), place=place)
    if isinstance(exc, ConflictError | IllegalTransition):
        return ApiError(409, str(exc), place=place)
    return ApiError(400, str(exc), place=place)


def _problem(exc: InputError) -> dict[str, Any]:
    """One of several problems of a document: its message, and its place and line if known."""
    problem: dict[str, Any] = {"message": exc.describe()}
    if exc.place:
        problem["place"] = exc.place
    if exc.line is not None:
        problem["line"] = exc.line
    return problem


def validation_error(errors: Sequence[Any]) -> ApiError:
    """FastAPI's validation errors as one answer naming the fields (400 for broken JSON)."""
    if any(e.get("type") == "json_invalid" for e in errors):
        first = next(e for e in errors if e.get("type") == "json_invalid")
        detail = first.get("ctx", {}).get("error", "")
        return ApiError(400, f"the body is not valid JSON ({detail})" if detail else "bad JSON")
    messages = [_describe(e) for e in errors]
    place = _place(errors[0].get("loc", ())) if errors else None
    return ApiError(422, "; ".join(messages) or "invalid request", place=place or None)


def _place(loc: Sequence[Any]) -> str:
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    return ".".join(str(p) for p in parts)


def _describe(error: Mapping[str, Any]) -> str:
    place = _place(error.get("loc", ()))
    kind = error.get("type", "")
    if not place:
        return "a JSON body is required" if kind == "missing" else "the body must be a JSON object"
    if kind == "extra_forbidden":
        return f"unknown field {place!r}"
    if kind == "missing":
        return f"{place!r} is required"
    return f"{place}: {error.get('msg', 'is invalid')}"


METHODS: Final = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def not_allowed(request: Request) -> ApiError:
    """405 with every method the path answers in ``Allow`` (Starlette names one route's only)."""
    routes = request.app.router.routes
    allowed = ", ".join(
        method
        for method in METHODS
        if any(r.matches({**request.scope, "method": method})[0] is Match.FULL for r in routes)
    )
    message = f"{request.method} is not allowed on {request.url.path}; it answers {allowed}"
    return ApiError(405, message, headers={"Allow": allowed})


def install(app: FastAPI) -> None:
    """Register the handlers that turn every error into the one JSON shape."""

    async def on_api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc)

    async def on_labq_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, LabqError)
        return error_response(from_labq(exc))

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return error_response(validation_error(exc.errors()))

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        message = exc.detail if isinstance(exc.detail, str) else "request refused"
        if exc.status_code == 404 and message == "Not Found":
            message = f"there is no endpoint {request.url.path}"
        if exc.status_code == 405:
            return error_response(not_allowed(request))
        return error_response(ApiError(exc.status_code, message, headers=exc.headers))

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(LabqError, on_labq_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
