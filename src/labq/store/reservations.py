"""Systems reserved or loaned to a person (issue 14): rows of ``system_reservations``.

A reservation is open until it is released or its ``until`` passes (the
scheduler's timer calls :meth:`ReservationStore.expire_reservations`); while
open, the scheduling core holds the system out of the queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import func, insert, select, update
from sqlalchemy.orm import aliased

from labq.errors import ConflictError, InputError
from labq.store.base import Db
from labq.store.tables import Jobs, RecipeSets, SystemReservations, Systems, Users

RESERVE = "reserve"
LOAN = "loan"


@dataclass(frozen=True)
class ReservationView:
    """An open reservation or loan: whose, since and until when (None: until released)."""

    fqdn: str
    holder: str
    kind: str  # reserve | loan
    since: datetime
    until: datetime | None
    recipe: int | None  # the recipe whose <reservesys> (or ``system reserve``) made it
    reason: str | None


class ReservationStore:
    """Open, list, release and expire reservations and loans."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def reserve_system(
        self,
        fqdn: str,
        holder: str,
        *,
        kind: str,
        actor: str,
        now: datetime,
        until: datetime | None = None,
        recipe: int | None = None,
        reason: str | None = None,
    ) -> ReservationView:
        """Hold ``fqdn`` for ``holder``; refused while someone holds it already."""
        if until is not None and until <= now:
            raise InputError("the reservation must end in the future", place="until")
        with self.db.atomic():
            system = self.db.system_by_fqdn(fqdn)
            found = self.reservation_of(fqdn)
            if found is not None:
                raise ConflictError(f"{fqdn} is already {describe(found)}")
            self.conn.execute(
                insert(SystemReservations).values(
                    system_id=system.id,
                    holder_id=self.db.user_id(holder),
                    kind=kind,
                    recipe_id=recipe,
                    since=now,
                    until=until,
                    reason=reason,
                )
            )
            action = "loan" if kind == LOAN else "reserve"
            self.db.log(now, actor, "system", action, name=fqdn, new=holder, reason=reason)
        stored = None if until is None else until.astimezone(UTC)
        return ReservationView(fqdn, holder, kind, now.astimezone(UTC), stored, recipe, reason)

    def release_reservation(
        self, fqdn: str, *, actor: str, now: datetime, reason: str | None = None
    ) -> ReservationView | None:
        """End the open reservation or loan of ``fqdn``; None when there was none."""
        with self.db.atomic():
            system = self.db.system_by_fqdn(fqdn)
            found = self.reservation_of(fqdn)
            if found is None:
                return None
            released_by = None if actor == "scheduler" else self.db.user_id(actor)
            self.conn.execute(
                update(SystemReservations)
                .where(
                    SystemReservations.system_id == system.id,
                    SystemReservations.released_at.is_(None),
                )
                .values(released_at=max(now, found.since), released_by=released_by, reason=reason)
            )
            self.db.log(now, actor, "system", "release", name=fqdn, old=found.holder, reason=reason)
        return found

    def reservation_of(self, fqdn: str) -> ReservationView | None:
        """The open reservation or loan of ``fqdn``, if any."""
        found = self.open_reservations(fqdn)
        return found.get(fqdn)

    def open_reservations(self, fqdn: str | None = None) -> dict[str, ReservationView]:
        """Every open reservation and loan (or only ``fqdn``'s), by system."""
        stmt = (
            select(
                Systems.fqdn,
                Users.name,
                SystemReservations.kind,
                SystemReservations.since,
                SystemReservations.until,
                SystemReservations.recipe_id,
                SystemReservations.reason,
            )
            .join(Systems, Systems.id == SystemReservations.system_id)
            .join(Users, Users.id == SystemReservations.holder_id)
            .where(SystemReservations.released_at.is_(None))
            .order_by(Systems.fqdn)
        )
        if fqdn is not None:
            stmt = stmt.where(Systems.fqdn == fqdn)
        return {
            row[0]: ReservationView(row[0], row[1], row[2], row[3], row[4], row[5], row[6])
            for row in self.conn.execute(stmt)
        }

    def expire_reservations(self, now: datetime) -> list[str]:
        """Release the reservations whose time ran out by ``now``; returns their systems."""
        ended = [
            r.fqdn
            for r in self.open_reservations().values()
            if r.until is not None and r.until <= now
        ]
        for fqdn in ended:
            self.release_reservation(fqdn, actor="scheduler", now=now, reason="its time ran out")
        return ended

    def next_reservation_end(self) -> datetime | None:
        """When the first open reservation with an end runs out (None: none has one)."""
        found: datetime | None = self.conn.execute(
            select(func.min(SystemReservations.until)).where(
                SystemReservations.released_at.is_(None)
            )
        ).scalar()
        return found

    def owner_of_set(self, set_id: int) -> str:
        """The name of the person who owns a recipe set's job."""
        owner = aliased(Users)
        name: str = self.conn.execute(
            select(owner.name)
            .join(Jobs, Jobs.owner_id == owner.id)
            .join(RecipeSets, RecipeSets.job_id == Jobs.id)
            .where(RecipeSets.id == set_id)
        ).scalar_one()
        return name


def describe(reservation: ReservationView) -> str:
    """``reserved by alice until 2026-11-26 14:05 UTC`` (or ``loaned to bob``)."""
    how = "loaned to" if reservation.kind == LOAN else "reserved by"
    until = "" if reservation.until is None else f" until {reservation.until:%Y-%m-%d %H:%M:%S} UTC"
    return f"{how} {reservation.holder}{until}"
