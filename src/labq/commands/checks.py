"""What ``labq validate`` checks against a server, when one is at hand: host properties no
system records.

The document alone cannot tell ``memroy_mb`` from a property an admin set on some
system; the server's systems can. A job asking for one that none records is not
invalid (a system may get it later), so this is a warning on stderr and the exit
status stays 0. Without connection settings the check is skipped in silence (a file
is often checked where no server is); ``--verbose`` says why it was skipped.
"""

from __future__ import annotations

import click

from labq.client import Client, resolve_connection
from labq.clisession import Session
from labq.domain.job import JobSpec
from labq.domain.shortfall import unknown_problem, unrecorded
from labq.errors import LabqError
from labq.formats.origins import Origins

TIMEOUT_S = 5.0  # a check by the way: a server that does not answer soon is skipped


def warn_unrecorded(ctx: click.Context, spec: JobSpec, origins: Origins, *, verbose: bool) -> None:
    """Warn, one line each, about the host properties of ``spec`` that no system records."""
    known = _recorded(ctx, verbose)
    if known is None:
        return
    told: set[tuple[int | None, str, str]] = set()
    for path, prop in unrecorded(spec, known):
        line, place = origins.locate(path, prop)
        if (line, place, prop) in told:  # recipes that share one requirement in the file
            continue
        told.add((line, place, prop))
        where = f"{origins.source}:{line}" if line is not None else origins.source
        click.echo(f"labq: warning: {where}: {place}: {unknown_problem(prop, known)}", err=True)


def _recorded(ctx: click.Context, verbose: bool) -> frozenset[str] | None:
    """The properties the server's systems record; None (said with ``verbose``) if it cannot
    be asked."""
    session = ctx.find_object(Session) or Session()
    try:
        connection = resolve_connection(session.url, session.token)
        if not connection.token:
            _skipped("no server is configured (LABQ_URL and LABQ_TOKEN)", verbose)
            return None
        with Client(connection, timeout=TIMEOUT_S) as client:
            found = client.get("/systems/properties")
    except LabqError as exc:
        _skipped(str(exc), verbose)
        return None
    return frozenset(found["recorded"])


def _skipped(why: str, verbose: bool) -> None:
    if verbose:
        click.echo(f"labq: host properties not checked against a server: {why}", err=True)
