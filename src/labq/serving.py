"""Serving HTTP without letting slow clients hold the server: deadlines and a connection cap.

uvicorn's HTTP/1.1 protocol (h11) waits for a request's head and body as long as
a client cares to trickle them, and accepts every connection until the process
runs out of file descriptors. :func:`protocol_class` makes a subclass of it that
keeps three rules:

- a connection waiting for a request head (new, or idle after a response) gets
  it within ``header_timeout`` seconds, or is closed (with 408 if part came);
- a request's body arrives within ``body_timeout`` seconds of its head, or the
  connection is closed;
- at most ``max_connections`` are open: a new one over the cap pushes out the
  connection that has waited longest for a request head, and when every one is
  busy with a request it is answered 503 and closed at once.

So the descriptors a server holds stay bounded (by the cap plus the listen
backlog, :func:`accept_backlog`), and a normal client, which sends its request
at once, is served even while thousands trickle.
"""

from __future__ import annotations

import json
import logging
import resource
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Final

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("labq.server")

RESERVED_FDS: Final = 256  # the database, logs, supervisors' pipes: not for clients


@dataclass(frozen=True)
class ConnectionLimits:
    """How long a client may take, and how many may be connected at once."""

    header_timeout: float
    body_timeout: float
    max_connections: int


class _Book:
    """The connections of one server that wait for a request head, longest first."""

    def __init__(self, limits: ConnectionLimits):
        self.limits = limits
        self.waiting: OrderedDict[GuardedH11, None] = OrderedDict()

    def oldest_waiting(self, besides: GuardedH11) -> GuardedH11 | None:
        for connection in self.waiting:
            if connection is not besides:
                return connection
        return None


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with the deadlines and the cap (see the module docstring)."""

    book: _Book  # set by protocol_class, one per server

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._phase = "new"
        self._timer: Any = None
        if len(self.connections) > self.book.limits.max_connections:
            victim = self.book.oldest_waiting(besides=self)
            if victim is None:
                self._refuse(503, "the server is busy: too many connections; try again")
                return
            victim._refuse(408, "closed to make room: no request came")
        self._follow()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    def connection_lost(self, exc: Exception | None) -> None:
        self._enter("closed", None)
        super().connection_lost(exc)

    def _follow(self) -> None:
        """Arm the deadline of what this connection now waits for from its client."""
        if self.transport.is_closing():
            self._enter("closed", None)
        elif self.conn.their_state is h11.IDLE and self.conn.our_state is h11.IDLE:
            self._enter("head", self.book.limits.header_timeout)
        elif self.conn.their_state is h11.SEND_BODY:
            self._enter("body", self.book.limits.body_timeout)
        else:
            self._enter("busy", None)  # the application has the request: no deadline

    def _enter(self, phase: str, timeout: float | None) -> None:
        if phase == self._phase:
            return
        self._phase = phase
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if timeout is not None:
            self._timer = self.loop.call_later(timeout, self._expired)
        if phase == "head":
            self.book.waiting[self] = None  # the newest waiter goes last
        else:
            self.book.waiting.pop(self, None)

    def _expired(self) -> None:
        self._timer = None
        if self._phase == "head":
            self._refuse(408, "no complete request head in time")
        elif self._phase == "body":
            self.transport.close()  # the application sees the client gone

    def _refuse(self, status: int, message: str) -> None:
        """Answer ``status`` on the raw socket (no request may have come) and close."""
        self._enter("closed", None)
        self.connections.discard(self)
        if self.transport.is_closing():
            return
        if status == 503 or self.conn.their_state is h11.IDLE:
            self.transport.write(_raw_answer(status, message))
        self.transport.close()


def _raw_answer(status: int, message: str) -> bytes:
    body = json.dumps({"error": {"status": status, "message": message}}).encode()
    reason = {408: b"Request Timeout", 503: b"Service Unavailable"}[status]
    head = (
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n" % (status, reason, len(body))
    )
    return head + body


def protocol_class(limits: ConnectionLimits) -> type[GuardedH11]:
    """The protocol for one server: its own book of waiting connections."""
    return type("LabqH11Protocol", (GuardedH11,), {"book": _Book(limits)})


def accept_backlog(limits: ConnectionLimits) -> int:
    """The listen backlog: asyncio accepts up to this many sockets at once before the cap
    can look at them, so it bounds how far past the cap the descriptors may go."""
    # Half the cap: one batch of accepted connections can never push out a client whose
    # request is already in its socket, waiting for the next turn of the loop.
    return max(64, min(2048, limits.max_connections // 2))


def allow_descriptors(limits: ConnectionLimits) -> ConnectionLimits:
    """Raise the soft file limit so the cap fits; lower the cap if the hard limit cannot."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = limits.max_connections + accept_backlog(limits) + RESERVED_FDS
    if soft != resource.RLIM_INFINITY and soft < wanted:
        soft = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return limits
    fitting = max((soft - RESERVED_FDS) * 4 // 5, 16)  # room for the backlog too
    log.warning(
        "server.max_connections lowered from %d to %d: the file limit is %d",
        limits.max_connections,
        fitting,
        soft,
    )
    return ConnectionLimits(limits.header_timeout, limits.body_timeout, fitting)
