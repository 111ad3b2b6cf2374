"""A path of the document without parameters answers the methods it lists there, and no other.

``/jobs/cancel`` answers POST only, but the router would give ``GET /jobs/cancel``
to ``GET /jobs/{job_id}`` (and refuse it with 422: "cancel" is no id), and
``Allow`` would name GET. :class:`LiteralPaths` sits in front of the router and
answers any other method on such a path with 405, ``Allow`` naming what the
document lists — as ``OPTIONS`` and the document say.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from labq.gateway.errors import METHODS, ApiError, error_response


class LiteralPaths:
    """Pure ASGI: 405 for a method the document does not list on a literal path of it."""

    def __init__(self, app: ASGIApp, *, document: Callable[[], dict[str, Any]]) -> None:
        self.app = app
        self.document = document
        self._allowed: Mapping[str, str] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            allowed = self.allowed().get(_route_path(scope))
            if allowed is not None and scope["method"] not in allowed.split(", "):
                path = scope["path"]
                message = f"{scope['method']} is not allowed on {path}; it answers {allowed}"
                refusal = ApiError(405, message, headers={"Allow": allowed})
                await error_response(refusal)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def allowed(self) -> Mapping[str, str]:
        """Each parameterless path of the document -> its methods, as ``Allow`` says them."""
        if self._allowed is None:  # the document is made once, on the first request
            paths: dict[str, dict[str, Any]] = self.document().get("paths", {})
            self._allowed = {
                path: ", ".join(m for m in METHODS if m.lower() in item)
                for path, item in paths.items()
                if "{" not in path
            }
        return self._allowed


def _route_path(scope: Scope) -> str:
    """The path the router matches (behind a proxy's ``root_path``, without it)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path
