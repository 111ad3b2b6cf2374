"""What the dispatcher and its fork server agree on: the module to run and the packet size.

Apart from :mod:`labq.dispatch.forkserver` so that the server, which only starts the fork
server, does not import the supervisor's modules that the fork server preloads (most of a
second of CPU for every server start)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

MODULE: Final = "labq.dispatch.forkserver"
PACKET: Final = 1 << 16
# What a fork server imports before its first fork beyond the supervisor's own modules,
# named on its command line: the driver of the server's database (not both: each costs
# a tenth of a second or more at every server start), or a lab agent's supervisor.
DRIVERS: Final[Mapping[str, tuple[str, ...]]] = {
    "sqlite": ("sqlalchemy.dialects.sqlite.pysqlite", "sqlite3"),
    "postgresql": ("sqlalchemy.dialects.postgresql.psycopg", "psycopg"),
}
# SSH's library (asyncssh, half a second): for a server whose settings give a lab the SSH
# backend or VMs (reached over SSH), and for every lab agent (its labs are mostly remote)
SSH_PRELOAD: Final = ("labq.dispatch.backends.ssh", "labq.dispatch.vms.backend")
AGENT_PRELOAD: Final = ("labq.agent.supervisor", *SSH_PRELOAD)


def drivers_of(db_url: str) -> tuple[str, ...]:
    """The modules a supervisor of a server on ``db_url`` will import to connect (none
    named for a URL SQLAlchemy cannot read: the supervisor reports that itself)."""
    try:
        backend = make_url(db_url).get_backend_name()
    except ArgumentError:
        return ()
    return DRIVERS.get(backend, ())
