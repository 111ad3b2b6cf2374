"""Reserved and loaned systems, in the scheduler thread: the core follows the database.

- :func:`changed`: the API opened or released a reservation or a loan;
- :func:`expire`: reservations whose time ran out end (the service's timer, see
  :func:`next_wake`, wakes the thread when the first one is due).

A ``<reservesys>`` recipe's reservation opens as its set ends (``bridge.finish``).
On a VM slot it keeps the recipe's VM; when it ends, an :class:`EndKept` destroys
that VM before the slot is offered again.
"""

from __future__ import annotations

from datetime import datetime

from labq.scheduler.core import Scheduler
from labq.service import bridge
from labq.service.actions import Actions, EndKept
from labq.store import Repository, epoch


def changed(repo: Repository, core: Scheduler, fqdn: str, now: datetime) -> Actions:
    """A reservation or loan of ``fqdn`` was opened or released: hold or offer the system.
    (The caller sets its timer from :func:`next_wake` after.)"""
    if fqdn not in core.systems:  # its system-added event was lost: the pass repairs it
        return []
    found = repo.reservations.reservation_of(fqdn)
    at = epoch(now)
    if found is not None:
        return bridge.settle(repo, core, core.hold_system(fqdn, found.holder, at), now=now)
    ended = _end_kept(core, fqdn)
    return ended + bridge.settle(repo, core, core.release_system(fqdn, at), now=now)


def expire(repo: Repository, core: Scheduler, now: datetime) -> Actions:
    """End the reservations whose time ran out; their systems are offered again."""
    out: Actions = []
    for fqdn in repo.reservations.expire_reservations(now):
        if fqdn in core.systems:
            out += _end_kept(core, fqdn)
            out += bridge.settle(repo, core, core.release_system(fqdn, epoch(now)), now=now)
    return out


def _end_kept(core: Scheduler, fqdn: str) -> Actions:
    """A VM slot's reservation ended: its kept VM goes first (none kept: nothing to do)."""
    return [EndKept(fqdn)] if core.systems[fqdn].vm is not None else []


def next_wake(repo: Repository) -> datetime | None:
    """When the scheduler thread must wake next: a pause or a reservation runs out."""
    ends = [
        t
        for t in (repo.pauses.next_pause_end(), repo.reservations.next_reservation_end())
        if t is not None
    ]
    return min(ends, default=None)
