"""The ``labq`` group's session: the connection its options name, and the API client made
on first use.

Apart from :mod:`labq.commands` so that the group's callback, which runs before every
command, imports no HTTP client: ``labq server``, ``init``, ``demo`` and ``sim`` never
make one (httpx and the client's imports were a third of a second of every server's start).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from labq.client import Client


@dataclass
class Session:
    """What the group's options say; the client is made on first use."""

    url: str | None = None
    token: str | None = None
    _client: Client | None = field(default=None, repr=False)

    def client(self) -> Client:
        """A client for the resolved connection; refuses early when no token is known."""
        from labq.client import Client, ConnectionSettingsError, resolve_connection

        if self._client is None:
            connection = resolve_connection(self.url, self.token)
            if not connection.token:
                raise ConnectionSettingsError(
                    "no API token: set LABQ_TOKEN, pass --token, "
                    "or put 'token:' in the client file (see docs/cli.md)"
                )
            self._client = Client(connection)
        return self._client

    def close(self) -> None:
        """Close the client, if one was made."""
        if self._client is not None:
            self._client.close()
