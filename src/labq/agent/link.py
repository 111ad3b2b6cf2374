"""The agent's calls to the server (``/api/v1/agent/…``), and what their failures mean.

Every failure is one of four errors, by what the caller should do about it:

- :class:`Unreachable`: the network, a timeout or a server error (5xx, 429) — try
  again later, the same call (every call is safe to repeat);
- :class:`TokenRefused`: the agent token is unknown or revoked — stop the agent;
- :class:`ClaimGone`: the set is not (or no longer) this agent's — stop its tasks,
  send nothing more for it;
- :class:`Refused`: any other refusal (a 4xx): a bug, not worth repeating.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

import httpx

from labq.errors import LabqError

PREFIX: Final = "/api/v1/agent"
TIMEOUT: Final = 20.0  # seconds for one call (a claim's long poll gets its wait on top)
T = TypeVar("T")


class LinkError(LabqError):
    """A call to the server failed; the subclass says what to do."""


class Unreachable(LinkError):  # noqa: N818 - says what the server is
    """No answer, or a passing failure of the server: try again."""


class TokenRefused(LinkError):  # noqa: N818 - says what happened
    """The agent token is unknown or revoked."""


class ClaimGone(LinkError):  # noqa: N818 - says what happened
    """The set is not this agent's under that claim (the server ended it, or never gave it)."""


class Refused(LinkError):  # noqa: N818 - says what happened
    """The server refused the call for a reason repeating it will not change."""


class Link:
    """An HTTP connection to one server, as one agent (its token)."""

    def __init__(
        self, url: str, token: str, *, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.url + PREFIX,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=TIMEOUT,
            transport=transport,
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def hello(self, *, version: str, host: str, max_sets: int) -> dict[str, Any]:
        """Say who the agent is; the answer names its labs and the heartbeat settings."""
        answer: dict[str, Any] = self._call(
            "POST", "/hello", json={"version": version, "host": host, "max_sets": max_sets}
        )
        return answer

    def claim(
        self, most: int, wait: float, labs: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        """Claim up to ``most`` sets (of ``labs`` only, when given: a narrower agent than its
        token), waiting up to ``wait`` seconds for one."""
        body: dict[str, Any] = {"max": most, "wait": wait}
        if labs is not None:
            body["labs"] = list(labs)
        answer = self._call("POST", "/claim", json=body, timeout=TIMEOUT + wait)
        sets: list[dict[str, Any]] = answer["sets"]
        return sets

    def beat(
        self, sets: Sequence[tuple[int, str]], running: int
    ) -> tuple[dict[int, str], dict[int, float]]:
        """Renew the agent and each set; each set's answer (carry on, stop or lost), and the
        max_time of those that have one as it stands now (``labq job extend`` moves it)."""
        body = {"sets": [{"set": s, "claim": c} for s, c in sets], "running": running}
        answer = self._call("POST", "/beat", json=body)
        words = {int(k): str(v) for k, v in answer["sets"].items()}
        deadlines = {int(k): float(v) for k, v in (answer.get("deadlines") or {}).items()}
        return words, deadlines

    def report(self, set_id: int, claim: str, events: Sequence[dict[str, Any]]) -> int:
        """Send numbered reports; the number of the last one the server has applied."""
        body = {"claim": claim, "events": list(events)}
        return int(self._call("POST", f"/sets/{set_id}/report", json=body)["applied"])

    def put_log(self, set_id: int, claim: str, path: str, offset: int, chunk: bytes) -> int:
        """Send a log chunk at ``offset``; the server's size of the file after it (its
        size when it refused a gap)."""
        try:
            answer = self._call(
                "PUT",
                f"/sets/{set_id}/logs",
                params={"path": path, "offset": offset},
                content=chunk,
                headers={"X-Labq-Claim": claim, "Content-Type": "application/octet-stream"},
            )
        except _GapError as gap:
            return gap.size
        return int(answer["size"])

    def ended(self, set_id: int, claim: str, code: int | None) -> None:
        """The set's supervisor exited and everything it left was sent."""
        self._call("POST", f"/sets/{set_id}/ended", json={"claim": claim, "code": code})

    def locks(self, set_id: int, claim: str) -> dict[str, Any]:
        """Ask for the set's declared locks: ``granted``, ``refused``, ``waiting``."""
        answer: dict[str, Any] = self._call("POST", f"/sets/{set_id}/locks", json={"claim": claim})
        return answer

    def _call(self, method: str, path: str, *, timeout: float | None = None, **kwargs: Any) -> Any:
        try:
            response = self._http.request(
                method, path, timeout=timeout if timeout is not None else TIMEOUT, **kwargs
            )
        except httpx.TransportError as exc:
            detail = str(exc) or type(exc).__name__
            raise Unreachable(f"cannot reach the labq server at {self.url} ({detail})") from None
        if response.status_code >= 400:
            raise _failure(response)
        try:
            return response.json()
        except ValueError:  # not labq answering (a proxy's page): as good as no answer
            raise Unreachable(f"{self.url} did not answer as a labq server does") from None


class _GapError(LinkError):
    def __init__(self, size: int) -> None:
        super().__init__(f"the server has {size} bytes")
        self.size = size


def _failure(response: httpx.Response) -> LinkError:
    status = response.status_code
    try:
        body = response.json()
        message = str(body["error"]["message"])
    except (ValueError, KeyError, TypeError):
        body, message = {}, f"the server answered {status} {response.reason_phrase}"
    if status == 401:
        return TokenRefused("the agent token is unknown or revoked")
    if status == 409 and isinstance(body.get("size"), int):
        return _GapError(body["size"])
    if status == 403 or (status == 409 and body.get("lost")):
        return ClaimGone(message)
    if status >= 500 or status in (408, 429):
        return Unreachable(f"the labq server answered {status}: {message}")
    return Refused(message)


def retrying(
    call: Callable[[], T],
    *,
    stop: threading.Event,
    on_failure: Callable[[LinkError], None] = lambda _e: None,
    first: float = 0.5,
    most: float = 10.0,
) -> T:
    """``call()`` until it does not fail with :class:`Unreachable`, waiting longer each time
    (``first`` seconds, doubling up to ``most``); :class:`Unreachable` again once ``stop`` is
    set. Other errors are raised at once."""
    delay = first
    while True:
        try:
            return call()
        except Unreachable as exc:
            on_failure(exc)
            if stop.wait(delay):
                raise
            delay = min(delay * 2, most)
