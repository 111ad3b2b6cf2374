"""The outermost layer: a cap on request bodies, and no traceback ever sent.

Pure ASGI, so that an oversized body is refused before anything reads it:
a ``Content-Length`` over the limit is answered at once, and a body streamed
without one is read only up to the limit. The body (at most the limit) is then
replayed to the application.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from labq.api.errors import error_body

log = logging.getLogger("labq.api")


class Guard:
    """Refuse bodies over ``max_body_bytes`` (413) and answer 500 for any uncaught error."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int):
        self.app = app
        self.limit = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            replay = await self._read_body(scope, receive)
            if replay is None:
                await _answer(send, 413, f"the body is larger than {self.limit} bytes")
                return
            await self.app(scope, replay, tracking_send)
        except Exception:
            # Logged with the path only: headers and bodies may hold secrets.
            log.exception("internal error on %s %s", scope.get("method"), scope.get("path"))
            if not started:
                await _answer(send, 500, "internal error")

    async def _read_body(self, scope: Scope, receive: Receive) -> Receive | None:
        """A receive that replays the body, or None when it is over the limit."""
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    if int(value) > self.limit:
                        return None
                except ValueError:
                    pass
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                # The client went away: pass that on as it came.
                return _replay([message], receive)
            body = message.get("body", b"")
            size += len(body)
            if size > self.limit:
                return None
            chunks.append(body)
            if not message.get("more_body", False):
                break
        whole: Message = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        return _replay([whole], receive)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay


async def _answer(send: Send, status: int, message: str) -> None:
    body: dict[str, Any] = error_body(status, message)
    data = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", b"%d" % len(data)),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
