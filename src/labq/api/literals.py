"""A path of the document without parameters answers the methods it lists there, and no other.

``/jobs/cancel`` answers POST only, but the router would give ``GET /jobs/cancel``
to ``GET /jobs/{job_id}`` (and refuse it with 422: "cancel" is no id), and
``Allow`` would name GET. :class:`LiteralPaths` sits in front of the router and
answers any other method on such a path with 405, ``Allow`` naming what the
document lists — as ``OPTIONS`` and the document say.

The methods are read from the routers the document is made of, not from the
document: making it costs about a second of CPU, which every new app (each
server start, each API test) paid on its first request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fastapi import APIRouter
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from labq.gateway.errors import METHODS, ApiError, error_response


class LiteralPaths:
    """Pure ASGI: 405 for a method the document does not list on a literal path of it."""

    def __init__(self, app: ASGIApp, *, allowed: Mapping[str, str]) -> None:
        self.app = app
        self.allowed = allowed  # literal path -> its methods, as ``Allow`` says them

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            allowed = self.allowed.get(_route_path(scope))
            if allowed is not None and scope["method"] not in allowed.split(", "):
                path = scope["path"]
                message = f"{scope['method']} is not allowed on {path}; it answers {allowed}"
                refusal = ApiError(405, message, headers={"Allow": allowed})
                await error_response(refusal)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def allowed_methods(mounted: Iterable[tuple[str, APIRouter]]) -> dict[str, str]:
    """Each parameterless path the document lists -> its methods, as ``Allow`` says them;
    ``mounted`` holds each router with the prefix it is included under."""
    found: dict[str, set[str]] = {}
    for prefix, router in mounted:
        if not router.include_in_schema:
            continue
        for route in router.routes:
            if isinstance(route, APIRoute) and route.include_in_schema and "{" not in route.path:
                found.setdefault(prefix + route.path, set()).update(route.methods or ())
    return {path: ", ".join(m for m in METHODS if m in methods) for path, methods in found.items()}


def _route_path(scope: Scope) -> str:
    """The path the router matches (behind a proxy's ``root_path``, without it)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path
