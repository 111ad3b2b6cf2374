"""Reserving, loaning and releasing systems (issue 14; Beaker's system-reserve and loans).

A reservation is a one-recipe job pinned to the system, so priorities, holds and pool
access apply; when it runs, its recipe ends at once and the system stays the caller's
for a while. A loan (admins) gives a user the system at once. Either ends on release,
by its holder or an admin.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from labq.domain.events import EventSink, JobSubmitted, ReservationChanged
from labq.domain.job import JobSpec
from labq.domain.model import User
from labq.errors import ConflictError, ForbiddenError
from labq.store import Repository
from labq.store.reservations import LOAN, ReservationView, describe
from labq.usecases.permissions import require_admin

# Stores a job for a user with every check a submission passes, returning its id.
SubmitJob = Callable[[Repository, User, JobSpec], int]


def reservation_spec(fqdn: str, holder: str, seconds: int) -> JobSpec:
    """The one-recipe job that reserves ``fqdn`` for ``holder`` for ``seconds`` once it runs."""
    return JobSpec.model_validate(
        {
            "whiteboard": f"reserve {fqdn} for {holder}",
            "recipe_sets": [
                {
                    "recipes": [
                        {
                            "force": fqdn,
                            "metadata": {"reservesys": {"duration": seconds, "when": "always"}},
                        }
                    ]
                }
            ],
        }
    )


def reserve_system(
    repo: Repository,
    caller: User,
    fqdn: str,
    seconds: int,
    *,
    submit: SubmitJob,
    sink: EventSink,
) -> int:
    """Queue a reservation of ``fqdn`` for ``caller``; returns the reservation job's id.

    Refused while someone holds the system already (reserved or loaned).
    """
    spec = reservation_spec(fqdn, caller.name, seconds)
    system = repo.systems.get_system(fqdn)  # NotFoundError for an unknown system
    held = repo.reservations.reservation_of(system.fqdn)
    if held is not None:
        raise ConflictError(f"{fqdn} is already {describe(held)}")
    job_id = submit(repo, caller, spec)
    sink.post(JobSubmitted(job_id))
    return job_id


def loan_system(
    repo: Repository,
    caller: User,
    fqdn: str,
    to: str,
    *,
    seconds: int | None,
    reason: str | None,
    now: datetime,
    sink: EventSink,
) -> ReservationView:
    """Give user ``to`` exclusive use of ``fqdn`` now, for ``seconds`` or until released
    (admins); a recipe running on it runs to its end."""
    require_admin(caller)
    until = None if seconds is None else now + timedelta(seconds=seconds)
    repo.people.get_user(to)  # NotFoundError for an unknown user
    found = repo.reservations.reserve_system(
        fqdn, to, kind=LOAN, actor=caller.name, now=now, until=until, reason=reason
    )
    sink.post(ReservationChanged(fqdn))
    return found


def release_system(
    repo: Repository, caller: User, fqdn: str, *, now: datetime, sink: EventSink
) -> ReservationView:
    """End ``fqdn``'s reservation or loan (its holder or an admin); returns what ended."""
    held = repo.reservations.reservation_of(repo.systems.get_system(fqdn).fqdn)
    if held is None:
        raise ConflictError(f"{fqdn} is neither reserved nor loaned")
    if held.holder != caller.name and not caller.admin:
        raise ForbiddenError(f"{fqdn} is {describe(held)}: only they or an admin may release it")
    repo.reservations.release_reservation(fqdn, actor=caller.name, now=now, reason="released")
    sink.post(ReservationChanged(fqdn))
    return held
