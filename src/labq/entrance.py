"""Who may send a request body: the credential in a request's head, checked before the body.

:mod:`labq.serving` shows the :class:`Entrance` the head of every request that
has a body. A body is read only when the head carries a credential the route
can take — a bearer token on the API (an agent token on ``/agent``), the session
cookie on the web pages — that is valid now, or when the route takes a body
without one (the login form: small, and tightly bound by the server). Anything
else is refused at once, so a client without a credential cannot hold a
connection by trickling a body.

The check only reads: the route checks the credential again, fully, once the
body is in (so a token revoked a moment ago is refused there). Verdicts are kept
for :data:`REMEMBER` seconds, so a client sending many bodies costs one lookup.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Final

from sqlalchemy import Engine
from starlette.requests import cookie_parser

from labq.serving import Admit, Head, Refuse, Verdict
from labq.store import reading
from labq.store.tokens import digest_of

API: Final = "/api/v1"
AGENT: Final = "/api/v1/agent/"  # the agents' own calls (not /api/v1/agents, the registry)
PAGES: Final = "/ui/"
SESSION_COOKIE: Final = "labq_session"  # labq.web.session.COOKIE (the web is not imported here)
OPEN: Final = frozenset({("POST", "/ui/login")})  # bodies taken without a credential
OPEN_BODY_BYTES: Final = 16 * 1024  # a login form is a few hundred bytes
REMEMBER: Final = 10.0  # seconds a verdict on a credential is kept
REMEMBERED: Final = 10_000  # verdicts kept at most (then forgotten all at once)
BEARER: Final = ((b"www-authenticate", b"Bearer"),)
TO_LOGIN: Final = ((b"location", b"/ui/login"),)


class Entrance:
    """The :class:`labq.serving.Doorman` of a labq server over ``engine``."""

    def __init__(self, engine: Engine, clock: Callable[[], datetime]):
        self.engine = engine
        self.clock = clock
        self._seen: dict[str, tuple[bool, float]] = {}  # kind + digest -> (valid, until)
        self._lock = threading.Lock()  # look_up runs in threads

    def at_once(self, head: Head) -> Verdict | None:
        """The verdict without the database: no credential, or one seen lately."""
        secret = _credential(head)
        if secret is None:
            return _without_credential(head)
        digest = digest_of(secret)
        with self._lock:
            seen = self._seen.get(_kind(head) + digest)
        if seen is None or seen[1] < time.monotonic():
            return None
        return Admit(digest) if seen[0] else _invalid(head)

    def look_up(self, head: Head) -> Verdict:
        """The verdict, reading the credential's row (called in a thread)."""
        known = self.at_once(head)  # a lookup queued behind another of the same token
        if known is not None:
            return known
        secret = _credential(head)
        assert secret is not None  # at_once answers for a head without one
        with reading(self.engine) as repo:
            if head.path.startswith(AGENT):
                valid = repo.agents.agent_by_secret(secret) is not None
            else:
                valid = repo.tokens.token_is_valid(secret, now=self.clock())
        digest = digest_of(secret)
        with self._lock:
            if len(self._seen) >= REMEMBERED:
                self._seen.clear()
            self._seen[_kind(head) + digest] = (valid, time.monotonic() + REMEMBER)
        return Admit(digest) if valid else _invalid(head)


def _kind(head: Head) -> str:
    """Which tokens the route takes: an agent's are no user's, nor the other way round."""
    return "agent:" if head.path.startswith(AGENT) else "user:"


def _credential(head: Head) -> str | None:
    """The secret the route of ``head`` would authenticate with, if the head has one."""
    if head.path.startswith(PAGES):
        for name, value in head.headers:
            if name == b"cookie":
                found = cookie_parser(value.decode("latin-1")).get(SESSION_COOKIE)
                if found:
                    return found
        return None
    for name, value in head.headers:
        if name == b"authorization":
            scheme, _, secret = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and secret.strip():
                return secret.strip()
    return None


def _without_credential(head: Head) -> Verdict:
    if (head.method, head.path) not in OPEN:
        return _invalid(head, missing=True)
    for name, value in head.headers:
        if name == b"content-length" and (not value.isdigit() or int(value) > OPEN_BODY_BYTES):
            return Refuse(413, f"a body here is at most {OPEN_BODY_BYTES} bytes")
    return Admit(None)


def _invalid(head: Head, *, missing: bool = False) -> Refuse:
    if head.path.startswith(PAGES):
        return Refuse(303, "log in first", TO_LOGIN)
    if head.path.startswith(AGENT):
        if missing:
            return Refuse(401, "this needs an agent token (Authorization: Bearer lqa_…)", BEARER)
        return Refuse(401, "the agent token is unknown or revoked", BEARER)
    if missing:
        return Refuse(401, "this needs an API token (Authorization: Bearer …)", BEARER)
    return Refuse(401, "the token is unknown, expired or revoked", BEARER)
