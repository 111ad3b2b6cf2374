"""The outermost layer: a cap on request bodies, no NUL in URLs, and no traceback ever sent.

Pure ASGI, so that an oversized body is refused before anything reads it:
a ``Content-Length`` over the limit is answered at once, and a body streamed
without one is read only up to the limit. The body (at most the limit) is then
replayed to the application. A URL whose path or query holds a NUL character
is refused with 400 before any route sees it: no database can store one.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from labq.gateway.errors import error_body

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
            nul = _nul_place(scope)
            if nul is not None:
                await _answer(send, 400, f"{nul}: must not contain a NUL character", place=nul)
                return
            replay = await self._read_body(scope, receive)
            if replay is None:
                message = f"the body is larger than {self.limit} bytes (limits.document_bytes)"
                await _answer(send, 413, message)
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


def _nul_place(scope: Scope) -> str | None:
    """Where the URL holds a NUL: the query parameter's name, or ``path``; None if nowhere."""
    if "\x00" in scope.get("path", ""):
        return "path"
    query = scope.get("query_string", b"").decode("latin-1")
    if "%00" not in query:
        return None
    for name, value in parse_qsl(query, keep_blank_values=True):
        if "\x00" in name or "\x00" in value:
            return name.replace("\x00", "") or "query"
    return None


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay


async def _answer(send: Send, status: int, message: str, *, place: str | None = None) -> None:
    body: dict[str, Any] = error_body(status, message, place=place)
    data = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", b"%d" % len(data)),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
