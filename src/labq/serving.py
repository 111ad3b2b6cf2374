"""Serving HTTP without letting slow clients hold the server: deadlines, shares and a cap.

uvicorn's HTTP/1.1 protocol (h11) waits for a request's head and body as long as
a client cares to trickle them, and accepts every connection until the process
runs out of file descriptors. :func:`protocol_class` makes a subclass of it that
keeps these rules:

- a connection waiting for a request head (new, or idle after a response) gets
  it within ``header_timeout`` seconds, or is closed (with 408 if part came);
- a request that has a body is shown to a :class:`Doorman` before the body is
  read: a body without a valid credential is refused at once (401), except on
  the few routes that take one without (the login form), which get
  ``header_timeout`` for it and a small share of the connections;
- a credentialed body is read only while fewer than ``max_bodies`` bodies (and
  ``bodies_per_credential`` of the same credential) are arriving; past that, it
  gets a second to arrive whole (evictable meanwhile), else 503; it must arrive
  within ``body_timeout`` seconds of its head, and after ``body_grace`` seconds
  average at least ``body_min_rate`` bytes a second, or the connection is closed;
- at most ``max_connections`` are open: a new one over the cap pushes out the
  connection that has waited longest for a request head, and when every one is
  busy with a request it is answered 503 and closed at once.

So the descriptors a server holds stay bounded (by the cap plus a listen backlog
or two, :func:`accept_backlog`: asyncio closes a pushed-out socket a turn or two
of its loop after accepting its replacement), bodies can hold at most a share of the cap, and
a normal client, which sends its request at once, is served even while thousands
trickle heads or bodies.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import resource
from collections import Counter, OrderedDict
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any, Final, Protocol

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("labq.server")

RESERVED_FDS: Final = 256  # the database, logs, supervisors' pipes: not for clients
RECHECK: Final = 1.0  # seconds between looks at a body's rate once it keeps up
OVERFLOW_WAIT: Final = 1.0  # seconds a body past its share has to come whole
BODIES_BUSY: Final = "the server is busy: too many requests sending bodies; try again"
Headers = Sequence[tuple[bytes, bytes]]


@dataclasses.dataclass(frozen=True)
class ConnectionLimits:
    """How long a client may take, how many may be connected, and how many send bodies."""

    header_timeout: float
    body_timeout: float
    max_connections: int
    body_min_rate: float = 500.0  # bytes a second a body averages after its grace (0: any)
    body_grace: float = 5.0
    body_share: float = 0.5  # of max_connections: credentialed bodies arriving at once
    bodies_per_credential: int = 32

    @property
    def max_bodies(self) -> int:
        """Credentialed bodies arriving at once: the rest of the cap stays for the others."""
        return max(1, int(self.max_connections * self.body_share))

    @property
    def max_open_bodies(self) -> int:
        """Bodies without a credential (the login form) arriving at once."""
        return max(4, self.max_connections // 50)


@dataclasses.dataclass(frozen=True)
class Head:
    """What a :class:`Doorman` sees of a request that has a body: its head only."""

    method: str
    path: str
    headers: Headers  # names in lower case


@dataclasses.dataclass(frozen=True)
class Admit:
    """Read the body. ``credential`` (a digest, never the secret) counts it against that
    credential's share; None: a route that takes a body without one (tightly bound)."""

    credential: str | None


@dataclasses.dataclass(frozen=True)
class Refuse:
    """Answer at once, without reading the body, and close."""

    status: int
    message: str
    headers: tuple[tuple[bytes, bytes], ...] = ()


Verdict = Admit | Refuse


class Doorman(Protocol):
    """Decides, from a request's head, whether its body may be read."""

    def at_once(self, head: Head) -> Verdict | None:
        """The verdict when it needs no I/O (no credential, or one seen lately); else None."""

    def look_up(self, head: Head) -> Verdict:
        """The verdict, looking the credential up (may block: called in a thread)."""


class _Book:
    """The connections of one server that wait for a request head (longest first), and
    those whose admitted body is arriving, by credential."""

    def __init__(self, limits: ConnectionLimits, doorman: Doorman | None):
        self.limits = limits
        self.doorman = doorman
        self.waiting: OrderedDict[GuardedH11, None] = OrderedDict()
        self.bodies: dict[GuardedH11, str | None] = {}
        self.by_credential: Counter[str | None] = Counter()

    def oldest_waiting(self, besides: GuardedH11) -> GuardedH11 | None:
        for connection in self.waiting:
            if connection is not besides:
                return connection
        return None

    def take(self, connection: GuardedH11, credential: str | None) -> Refuse | None:
        """Count an admitted body that is arriving; a 503 when its share is full."""
        limits = self.limits
        if credential is None:
            full = self.by_credential[None] >= limits.max_open_bodies
        else:
            arriving = len(self.bodies) - self.by_credential[None]
            full = (
                arriving >= limits.max_bodies
                or self.by_credential[credential] >= limits.bodies_per_credential
            )
        if full:
            return Refuse(503, BODIES_BUSY)
        self.bodies[connection] = credential
        self.by_credential[credential] += 1
        return None

    def give_back(self, connection: GuardedH11) -> None:
        if connection in self.bodies:
            credential = self.bodies.pop(connection)
            self.by_credential[credential] -= 1
            if not self.by_credential[credential]:
                del self.by_credential[credential]


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with the deadlines, shares and cap (see the module docstring)."""

    book: _Book  # set by protocol_class, one per server

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._phase = "new"
        self._timer: Any = None
        self._pace: Any = None  # the next look at a body's rate
        self._body_from = 0.0  # when the body's head came, by the loop's clock
        self._body_bytes = 0
        self._arrived: asyncio.Event | None = None  # set when a body past its share is in
        self._application, self.app = self.app, self._gated
        if len(self.connections) > self.book.limits.max_connections:
            victim = self.book.oldest_waiting(besides=self)
            if victim is None:
                self._refuse(503, "the server is busy: too many connections; try again")
                return
            victim._make_room()
        self._follow()

    def data_received(self, data: bytes) -> None:
        if self._phase == "body":
            self._body_bytes += len(data)
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    def connection_lost(self, exc: Exception | None) -> None:
        self._enter("closed", None)
        super().connection_lost(exc)

    async def _gated(self, scope: Any, receive: Any, send: Any) -> None:
        """The application, behind the doorman for a request that has a body."""
        doorman = self.book.doorman
        if doorman is not None and scope["type"] == "http" and _has_body(scope["headers"]):
            head = Head(scope["method"], scope["path"], scope["headers"])
            verdict = doorman.at_once(head)
            if verdict is None:
                verdict = await self.loop.run_in_executor(None, doorman.look_up, head)
                if self._phase == "closed":
                    return  # gone while its credential was looked up
            refusal = verdict if isinstance(verdict, Refuse) else await self._admit(verdict)
            if refusal is not None:
                self._turn_away(refusal)
                return
        await self._application(scope, receive, send)

    def _turn_away(self, refusal: Refuse) -> None:
        """Answer a request whose body is not wanted, and close: the client may still be
        sending it."""
        if self.transport.is_closing():
            return
        self.cycle.disconnected = True  # uvicorn's cycle: nothing more is sent for it
        self.transport.write(_raw_answer(refusal.status, refusal.message, refusal.headers))
        self.transport.close()

    async def _admit(self, admitted: Admit) -> Refuse | None:
        """Take a share for an admitted body still arriving, and give it its full time."""
        if self._phase != "body":
            return None  # the body is in already (or the client has gone)
        refusal = self.book.take(self, admitted.credential)
        if refusal is None:
            if admitted.credential is not None:
                self._arm(self._body_from + self.book.limits.body_timeout - self.loop.time())
            return None
        # Past its share: a body that comes at once (in the next packet) needs none. It gets
        # a moment, evictable like a connection waiting for a head.
        arrived = self._arrived = asyncio.Event()
        self.book.waiting[self] = None
        try:
            await asyncio.wait_for(arrived.wait(), OVERFLOW_WAIT)
        except TimeoutError:
            return refusal
        finally:
            self._arrived = None
            self.book.waiting.pop(self, None)
        return refusal if self.transport.is_closing() else None

    def _follow(self) -> None:
        """Arm the deadline of what this connection now waits for from its client."""
        limits = self.book.limits
        if self.transport.is_closing():
            self._enter("closed", None)
        elif self.conn.their_state is h11.IDLE and self.conn.our_state is h11.IDLE:
            self._enter("head", limits.header_timeout)
        elif self.conn.their_state is h11.SEND_BODY:
            # until the doorman admits it with a credential, a body has a head's time
            tight = self.book.doorman is not None
            self._enter("body", limits.header_timeout if tight else limits.body_timeout)
        else:
            self._enter("busy", None)  # the application has the request: no deadline

    def _enter(self, phase: str, timeout: float | None) -> None:
        if phase == self._phase:
            return
        if self._phase == "body":
            self.book.give_back(self)
            if self._arrived is not None:
                self._arrived.set()
            if self._pace is not None:
                self._pace.cancel()
                self._pace = None
        self._phase = phase
        self._arm(timeout)
        if phase == "head":
            self.book.waiting[self] = None  # the newest waiter goes last
        else:
            self.book.waiting.pop(self, None)
        if phase == "body":
            self._body_from, self._body_bytes = self.loop.time(), 0
            if self.book.limits.body_min_rate > 0:  # 0: no rate, only the deadline
                self._pace = self.loop.call_later(self.book.limits.body_grace, self._check_pace)

    def _arm(self, timeout: float | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if timeout is not None:
            self._timer = self.loop.call_later(max(timeout, 0.0), self._expired)

    def _check_pace(self) -> None:
        """Close a body that falls behind the minimum rate; look again when it next could."""
        self._pace = None
        if self._phase != "body":
            return
        now, rate = self.loop.time(), self.book.limits.body_min_rate
        if self.flow.read_paused:  # the application is not reading: the slowness is ours
            self._body_from, self._body_bytes = now, 0
            self._pace = self.loop.call_later(self.book.limits.body_grace, self._check_pace)
            return
        due = self._body_from + self._body_bytes / rate  # when what came stops being enough
        if due < now:
            log.debug("closed a request body arriving slower than %g bytes/s", rate)
            self.transport.close()  # the application sees the client gone
            return
        self._pace = self.loop.call_later(max(due - now, RECHECK), self._check_pace)

    def _expired(self) -> None:
        self._timer = None
        if self._phase == "head":
            self._refuse(408, "no complete request head in time")
        elif self._phase == "body":
            self.transport.close()  # the application sees the client gone

    def _make_room(self) -> None:
        """Close this connection, the one that waited longest, for a new one."""
        if self._phase == "body":  # a body past its share, which did not come at once
            self.book.waiting.pop(self, None)
            self.connections.discard(self)  # room now, not when the loop has closed it
            self._turn_away(Refuse(503, BODIES_BUSY))
        else:
            self._refuse(408, "closed to make room: no request came")

    def _refuse(self, status: int, message: str) -> None:
        """Answer ``status`` on the raw socket (no request may have come) and close."""
        self._enter("closed", None)
        self.connections.discard(self)
        if self.transport.is_closing():
            return
        if status == 503 or self.conn.their_state is h11.IDLE:
            self.transport.write(_raw_answer(status, message))
        self.transport.close()


def _has_body(headers: Headers) -> bool:
    for name, value in headers:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


def _error_body(status: int, message: str) -> bytes:
    return json.dumps({"error": {"status": status, "message": message}}).encode()


def _raw_answer(status: int, message: str, headers: Headers = ()) -> bytes:
    """A whole answer that closes the connection, written without h11 or the access log:
    refusing must cost the server as little as possible (floods are made of refusals)."""
    body = _error_body(status, message)
    head = [
        b"HTTP/1.1 %d %s" % (status, HTTPStatus(status).phrase.encode()),
        b"content-type: application/json",
        b"content-length: %d" % len(body),
        b"connection: close",
        *(name + b": " + value for name, value in headers),
    ]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def protocol_class(limits: ConnectionLimits, doorman: Doorman | None = None) -> type[GuardedH11]:
    """The protocol for one server: its own book of connections. Without a doorman every
    body is read (within ``body_timeout`` and the rate), as uvicorn would."""
    return type("LabqH11Protocol", (GuardedH11,), {"book": _Book(limits, doorman)})


def accept_backlog(limits: ConnectionLimits) -> int:
    """The listen backlog: asyncio accepts up to this many sockets at once before the cap
    can look at them, and closes those they push out a turn or two later, so two of it
    bound how far past the cap the descriptors may go."""
    # Half the cap: one batch of accepted connections can never push out a client whose
    # request is already in its socket, waiting for the next turn of the loop.
    return max(64, min(2048, limits.max_connections // 2))


def allow_descriptors(limits: ConnectionLimits) -> ConnectionLimits:
    """Raise the soft file limit so the cap fits; lower the cap if the hard limit cannot."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = limits.max_connections + 2 * accept_backlog(limits) + RESERVED_FDS
    if soft != resource.RLIM_INFINITY and soft < wanted:
        soft = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return limits
    fitting = max((soft - RESERVED_FDS) // 2, 16)  # room for two backlogs of half the cap
    log.warning(
        "server.max_connections lowered from %d to %d: the file limit is %d",
        limits.max_connections,
        fitting,
        soft,
    )
    return dataclasses.replace(limits, max_connections=fitting)
