"""Reserve, loan and release systems (issue 14; Beaker's system-reserve and loans).

- ``POST /systems/{fqdn}/reserve`` queues a one-recipe job pinned to the system
  (so priorities, holds and pool access apply); when it runs, its recipe ends at
  once and the system stays reserved to the caller for ``for`` seconds (its
  ``<reservesys>``);
- ``POST /systems/{fqdn}/loan`` (admins) gives a user the system at once, for
  ``for`` seconds or until released; a recipe running on it runs to its end;
- ``POST /systems/{fqdn}/release`` ends either (the holder or an admin);
- ``GET /reservations``: every open reservation and loan.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from fastapi import APIRouter

from labq.api.openapi import answers
from labq.gateway.bodies import LoanBody, ReserveBody
from labq.gateway.deps import AdminDep, StateDep, UserDep
from labq.gateway.posting import committing
from labq.store import reading
from labq.store.reservations import ReservationView, describe
from labq.usecases import reservations
from labq.usecases.submission import submit_job

router = APIRouter(tags=["systems"])


def reservation_json(found: ReservationView) -> dict[str, Any]:
    """An open reservation or loan as the API shows it."""
    return {
        "fqdn": found.fqdn,
        "holder": found.holder,
        "kind": found.kind,
        "since": found.since.isoformat(),
        "until": None if found.until is None else found.until.isoformat(),
        "recipe": found.recipe,
        "reason": found.reason,
        "text": describe(found),
    }


@router.get("/reservations")
def list_reservations(state: StateDep, _: UserDep) -> dict[str, Any]:
    """Every open reservation and loan, by system."""
    with reading(state.engine) as repo:
        found = repo.reservations.open_reservations()
    return {"reservations": [reservation_json(r) for r in found.values()]}


def submitter(now: datetime) -> reservations.SubmitJob:
    """How a reservation's job is stored: as a native submission at ``now``."""
    return functools.partial(submit_job, fmt="native", now=now)


@router.post("/systems/{fqdn}/reserve", status_code=201, responses=answers(404, 409, 422))
def reserve_system(
    fqdn: str, body: ReserveBody, state: StateDep, caller: UserDep
) -> dict[str, Any]:
    """Queue a reservation of the system for the caller (a one-recipe job pinned to it)."""
    submit = submitter(state.clock())
    with committing(state) as (repo, sink):
        job_id = reservations.reserve_system(
            repo, caller, fqdn, body.seconds, submit=submit, sink=sink
        )
    return {"fqdn": fqdn, "job": job_id, "for": body.seconds, "url": f"/api/v1/jobs/{job_id}"}


@router.post("/systems/{fqdn}/loan", status_code=201, responses=answers(404, 409, 422))
def loan_system(fqdn: str, body: LoanBody, state: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Give a user exclusive use of the system now (admins)."""
    with committing(state) as (repo, sink):
        found = reservations.loan_system(
            repo,
            admin,
            fqdn,
            body.to,
            seconds=body.seconds,
            reason=body.reason,
            now=state.clock(),
            sink=sink,
        )
    return reservation_json(found)


@router.post("/systems/{fqdn}/release", responses=answers(403, 404, 409))
def release_system(fqdn: str, state: StateDep, caller: UserDep) -> dict[str, Any]:
    """End the system's reservation or loan (its holder or an admin)."""
    with committing(state) as (repo, sink):
        held = reservations.release_system(repo, caller, fqdn, now=state.clock(), sink=sink)
    return {**reservation_json(held), "released": True}
