"""A small typed client for labq's HTTP API, and where the command line finds it.

The connection comes from ``--url``/``--token``, else ``LABQ_URL``/``LABQ_TOKEN``,
else the client file (``client.yaml`` in the user config directory), else the
default URL. Errors are :class:`~labq.errors.LabqError` subclasses carrying the
server's own message, so the command line prints them as one line.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import httpx
import platformdirs
import yaml

from labq.errors import LabqError

DEFAULT_URL: Final = "http://127.0.0.1:8080"
API_PREFIX: Final = "/api/v1"
Params = Mapping[str, str | int | list[str] | None]  # a list: the parameter repeated
# what an HTTP header can carry as is: a token with anything else was pasted wrong ("lq_…")
_TOKEN: Final = re.compile(r"[\x21-\x7e]+")


class ServerError(LabqError):
    """The server refused or failed a request; ``str()`` is its message."""

    def __init__(self, status: int, message: str, place: str | None = None):
        self.status = status
        self.message = message
        self.place = place
        super().__init__(message)


class UnreachableError(LabqError):
    """Nothing answered at the URL."""


class ConnectionSettingsError(LabqError):
    """The client file is unreadable, malformed or too open, or no token is known."""


def config_path() -> Path:
    """Where the client file lives: ``<user config dir>/labq/client.yaml``."""
    return Path(platformdirs.user_config_dir("labq")) / "client.yaml"


@dataclass(frozen=True)
class Connection:
    """Where labq answers and the token to show it. ``repr`` never shows the token."""

    url: str
    token: str | None

    def __repr__(self) -> str:
        return f"Connection(url={self.url!r}, token={'set' if self.token else 'unset'})"


def resolve_connection(url: str | None, token: str | None) -> Connection:
    """Options (or their environment variables, as click reads them) over the client file."""
    given = "--url or LABQ_URL"
    if url is not None and token is not None:
        return Connection(_checked_url(url, given), _checked_token(token, "--token or LABQ_TOKEN"))
    path = config_path()
    stored = _read_client_file(path)
    return Connection(
        _checked_url(url, given) if url else _checked_url(stored.get("url") or DEFAULT_URL, path),
        (
            _checked_token(token, "--token or LABQ_TOKEN")
            if token
            else _checked_token(stored.get("token"), path)
        ),
    )


def _checked_url(url: str, source: str | Path) -> str:
    """The URL without its trailing slash; refused unless it is ``http(s)://HOST…``."""
    try:
        parsed = httpx.URL(url)
        fine = parsed.scheme in ("http", "https") and bool(parsed.host)
    except httpx.InvalidURL:
        fine = False
    if not fine:
        raise ConnectionSettingsError(
            f"{source}: {url!r} is not a labq server URL (expected http://HOST:PORT)"
        )
    return url.rstrip("/")


def _checked_token(token: str | None, source: str | Path) -> str | None:
    """The token as given; refused when it holds what no token holds (a placeholder's ``…``,
    a space), which would otherwise fail deep inside the HTTP client."""
    if token is None or _TOKEN.fullmatch(token):
        return token
    at, bad = next((i, c) for i, c in enumerate(token, 1) if not _TOKEN.fullmatch(c))
    raise ConnectionSettingsError(
        f"{source}: not an API token: character {at} is {bad!r} (U+{ord(bad):04X}); use the"
        " whole token labq printed (lq_ and 43 letters, digits, '-' or '_')"
    )


def _read_client_file(path: Path) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConnectionSettingsError(f"cannot read {path}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        raise ConnectionSettingsError(f"{path}: not valid YAML") from None
    if data is None:
        return {}
    if not isinstance(data, dict) or not set(data) <= {"url", "token"}:
        raise ConnectionSettingsError(f"{path}: expected a mapping with 'url' and 'token' only")
    for key, value in data.items():
        if not isinstance(value, str):
            raise ConnectionSettingsError(f"{path}: {key!r} must be text")
    if "token" in data and os.name == "posix":
        mode = path.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ConnectionSettingsError(
                f"{path} holds a token and others may read it "
                f"(mode {stat.S_IMODE(mode):03o}): run chmod 600 {path}"
            )
    return {str(k): str(v) for k, v in data.items()}


class Client:
    """Calls ``/api/v1`` with a bearer token; answers are the decoded JSON."""

    def __init__(
        self,
        connection: Connection,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.connection = connection
        headers = {"Accept": "application/json"}
        if connection.token:
            headers["Authorization"] = f"Bearer {connection.token}"
        self._http = httpx.Client(
            base_url=connection.url + API_PREFIX,
            headers=headers,
            timeout=timeout,
            transport=transport,
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def get(self, path: str, params: Params | None = None) -> Any:
        """``GET`` and decode JSON."""
        return self._send("GET", path, params=params).json()

    def get_text(self, path: str, params: Params | None = None) -> str:
        """``GET`` a plain-text answer (a log file)."""
        return self._send("GET", path, params=params).text

    @contextmanager
    def stream(self, path: str, params: Params | None = None) -> Iterator[httpx.Response]:
        """``GET`` an answer that comes in chunks (a followed log); read it inside the block.

        No read timeout: a followed log may be quiet for a while (the server bounds it).
        """
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            with self._http.stream(
                "GET", path, params=query, timeout=httpx.Timeout(30.0, read=None)
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    raise _server_error(response)
                yield response
        except httpx.TransportError as exc:
            detail = str(exc) or type(exc).__name__
            raise UnreachableError(f"lost labq at {self.connection.url} ({detail})") from None

    def get_bytes(self, path: str, params: Params | None = None) -> bytes:
        """``GET`` an answer as it came (an XML report)."""
        return self._send("GET", path, params=params).content

    def post(self, path: str, body: Any = None) -> Any:
        """``POST`` a JSON body (or none) and decode the answer."""
        return self._send("POST", path, json=body).json()

    def put(self, path: str, body: Any) -> Any:
        """``PUT`` a JSON body and decode the answer."""
        return self._send("PUT", path, json=body).json()

    def patch(self, path: str, body: Any) -> Any:
        """``PATCH`` a JSON body and decode the answer."""
        return self._send("PATCH", path, json=body).json()

    def delete(self, path: str) -> Any:
        """``DELETE`` and decode the answer."""
        return self._send("DELETE", path).json()

    def submit(self, document: bytes, *, content_type: str, fmt: str) -> Any:
        """``POST /jobs`` with a job document as the body."""
        return self._send(
            "POST",
            "/jobs",
            content=document,
            params={"format": fmt},
            headers={"Content-Type": content_type},
        ).json()

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        json: Any = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = self._http.request(
                method, path, params=query, json=json, content=content, headers=headers
            )
        except httpx.TransportError as exc:
            detail = str(exc) or type(exc).__name__
            raise UnreachableError(
                f"cannot reach labq at {self.connection.url} ({detail})"
            ) from None
        if response.status_code >= 400:
            raise _server_error(response)
        return response


def _server_error(response: httpx.Response) -> ServerError:
    """The error JSON's message, or the status line when the answer is not labq's."""
    status = response.status_code
    try:
        error = response.json()["error"]
        message = str(error["message"])
        place = error.get("place")
    except (ValueError, KeyError, TypeError):
        return ServerError(status, f"the server answered {status} {response.reason_phrase}")
    return ServerError(status, message, place if isinstance(place, str) else None)
