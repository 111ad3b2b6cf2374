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

from datetime import datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import Field

from labq.api.deps import AdminDep, StateDep, UserDep
from labq.api.errors import ApiError
from labq.api.events import tell
from labq.api.jobs import store_job
from labq.api.openapi import answers
from labq.api.schemas import INTEGRAL, Body, Name, Reason
from labq.domain.job import JobSpec
from labq.domain.reservesys import DEFAULT_SECONDS, MAX_SECONDS
from labq.errors import ConflictError
from labq.store import reading, transaction
from labq.store.reservations import LOAN, ReservationView, describe

router = APIRouter(tags=["systems"])

Seconds = Annotated[int, Field(ge=1, le=MAX_SECONDS), INTEGRAL]


class ReserveBody(Body):
    """How long to keep the system once the reservation job gets it (default: a day)."""

    seconds: Seconds = Field(default=DEFAULT_SECONDS, alias="for")


class LoanBody(Body):
    """Who gets the system, for how long (none: until released), and why."""

    to: Name
    seconds: Seconds | None = Field(default=None, alias="for")
    reason: Reason | None = None


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


@router.post("/systems/{fqdn}/reserve", status_code=201, responses=answers(404, 409, 422))
def reserve_system(
    fqdn: str, body: ReserveBody, state: StateDep, caller: UserDep
) -> dict[str, Any]:
    """Queue a reservation of the system for the caller (a one-recipe job pinned to it)."""
    spec = JobSpec.model_validate(
        {
            "whiteboard": f"reserve {fqdn} for {caller.name}",
            "recipe_sets": [
                {
                    "recipes": [
                        {
                            "force": fqdn,
                            "metadata": {
                                "reservesys": {"duration": body.seconds, "when": "always"}
                            },
                        }
                    ]
                }
            ],
        }
    )
    with transaction(state.engine) as repo:
        system = repo.systems.get_system(fqdn)  # 404 for an unknown system
        held = repo.reservations.reservation_of(system.fqdn)
        if held is not None:
            raise ConflictError(f"{fqdn} is already {describe(held)}")
        job_id = store_job(repo, caller, spec, "native", now=state.clock())
    tell(lambda: state.events.job_submitted(job_id))
    return {"fqdn": fqdn, "job": job_id, "for": body.seconds, "url": f"/api/v1/jobs/{job_id}"}


@router.post("/systems/{fqdn}/loan", status_code=201, responses=answers(404, 409, 422))
def loan_system(fqdn: str, body: LoanBody, state: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Give a user exclusive use of the system now (admins)."""
    now = state.clock()
    until = None if body.seconds is None else now + timedelta(seconds=body.seconds)
    with transaction(state.engine) as repo:
        repo.people.get_user(body.to)  # 404 for an unknown user
        found = repo.reservations.reserve_system(
            fqdn, body.to, kind=LOAN, actor=admin.name, now=now, until=until, reason=body.reason
        )
    tell(lambda: state.events.reservation_changed(fqdn))
    return reservation_json(found)


@router.post("/systems/{fqdn}/release", responses=answers(403, 404, 409))
def release_system(fqdn: str, state: StateDep, caller: UserDep) -> dict[str, Any]:
    """End the system's reservation or loan (its holder or an admin)."""
    now: datetime = state.clock()
    with transaction(state.engine) as repo:
        held = repo.reservations.reservation_of(repo.systems.get_system(fqdn).fqdn)
        if held is None:
            raise ConflictError(f"{fqdn} is neither reserved nor loaned")
        if held.holder != caller.name and not caller.admin:
            raise ApiError(403, f"{fqdn} is {describe(held)}: only they or an admin may release it")
        repo.reservations.release_reservation(fqdn, actor=caller.name, now=now, reason="released")
    tell(lambda: state.events.reservation_changed(fqdn))
    return {**reservation_json(held), "released": True}
