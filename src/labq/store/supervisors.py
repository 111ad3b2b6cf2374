"""Started recipe sets and the supervisors that run them (seed 001, issue 4).

A set *starts* when the scheduler decides so (``Start``): it gets its lab and
``started_at`` while its recipes stay ``scheduled`` for the dispatcher. The
dispatcher records the supervisor it launched (pid and host, so a restarted
dispatcher can adopt or kill it); the supervisor heart-beats; the consistency
pass asks for the sets whose supervisor went quiet. Every write is a guarded
UPDATE that must change exactly one row.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, exists, select, update

from labq.domain.states import RecipeState
from labq.errors import ConflictError, NotFoundError
from labq.store.base import StoreBase
from labq.store.tables import Labs, Recipes, RecipeSets, Systems


class SupervisorStore(StoreBase):
    """Starting sets, recording supervisors, heartbeats, stale supervisors, stop requests."""

    def start_recipe_set(self, set_id: int, *, lab: str, now: datetime) -> bool:
        """Mark a set started in ``lab``: every recipe must hold a system of that lab.

        False when it already started there (a repeat); ConflictError otherwise.
        """
        with self.atomic():
            lab_id = self._lab_id(lab)
            not_ready = exists().where(
                Recipes.recipe_set_id == RecipeSets.id,
                (Recipes.state != RecipeState.SCHEDULED.value)
                | Recipes.system_id.not_in(select(Systems.id).where(Systems.lab_id == lab_id)),
            )
            stmt = update(RecipeSets).where(
                RecipeSets.id == set_id,
                RecipeSets.started_at.is_(None),
                RecipeSets.finished_at.is_(None),
                ~not_ready,
            )
            if self.conn.execute(stmt.values(started_at=now, lab_id=lab_id)).rowcount == 1:
                return True
            row = self._set(set_id)
            if row.started_at is not None and row.lab_id == lab_id:
                return False
            raise ConflictError(
                f"recipe set {set_id} cannot start in {lab}: it has started or ended already,"
                " or not every recipe holds a system there"
            )

    def record_supervisor(self, set_id: int, pid: int, host: str, *, now: datetime) -> None:
        """The supervisor that runs a started set (replacing one a restart adopted or killed)."""
        with self.atomic():
            self._guarded(
                set_id,
                [RecipeSets.started_at.is_not(None), RecipeSets.finished_at.is_(None)],
                "has not started or has ended",
                supervisor_pid=pid,
                supervisor_host=host,
                heartbeat_at=now,
            )

    def heartbeat(self, set_id: int, *, now: datetime, pid: int | None = None) -> bool:
        """The supervisor is alive. True: carry on; False: stop (the set ended, was asked
        to stop, or — when ``pid`` is given — another supervisor has taken over).
        """
        with self.atomic():
            where: list[ColumnElement[bool]] = [
                RecipeSets.id == set_id,
                RecipeSets.supervisor_pid.is_not(None),
                RecipeSets.finished_at.is_(None),
            ]
            if pid is not None:
                where.append(RecipeSets.supervisor_pid == pid)
            stmt = update(RecipeSets).where(*where).values(heartbeat_at=now)
            if self.conn.execute(stmt).rowcount != 1:
                self._set(set_id)  # NotFoundError for no such set
                return False
        return self._set(set_id).stop_reason is None

    def stale_supervisors(self, *, older_than: datetime) -> list[int]:
        """Unfinished sets whose supervisor last heart-beat before ``older_than``."""
        stmt = (
            select(RecipeSets.id)
            .where(
                RecipeSets.finished_at.is_(None),
                RecipeSets.supervisor_pid.is_not(None),
                RecipeSets.heartbeat_at < older_than,
            )
            .order_by(RecipeSets.id)
        )
        return list(self.conn.execute(stmt).scalars())

    def supervised_sets(self) -> list[tuple[int, int, str | None]]:
        """Started, unfinished sets with a recorded supervisor: ``(set, pid, host)``."""
        stmt = (
            select(RecipeSets.id, RecipeSets.supervisor_pid, RecipeSets.supervisor_host)
            .where(
                RecipeSets.started_at.is_not(None),
                RecipeSets.finished_at.is_(None),
                RecipeSets.supervisor_pid.is_not(None),
            )
            .order_by(RecipeSets.id)
        )
        return [(row[0], row[1] or 0, row[2]) for row in self.conn.execute(stmt)]

    def unsupervised_sets(self, *, lab: str | None = None) -> list[int]:
        """Started, unfinished sets no supervisor has been recorded for: the dispatcher's work."""
        stmt = select(RecipeSets.id).where(
            RecipeSets.started_at.is_not(None),
            RecipeSets.finished_at.is_(None),
            RecipeSets.supervisor_pid.is_(None),
        )
        if lab is not None:
            stmt = stmt.where(RecipeSets.lab_id.in_(select(Labs.id).where(Labs.name == lab)))
        return list(self.conn.execute(stmt.order_by(RecipeSets.id)).scalars())

    def request_stop(self, set_id: int, reason: str) -> bool:
        """Ask a started set's supervisor to stop (the scheduler's ``Stop``); its next
        heartbeat returns False. False when it was asked already or has ended;
        ConflictError if it never started.
        """
        with self.atomic():
            stmt = update(RecipeSets).where(
                RecipeSets.id == set_id,
                RecipeSets.started_at.is_not(None),
                RecipeSets.finished_at.is_(None),
                RecipeSets.stop_reason.is_(None),
            )
            if self.conn.execute(stmt.values(stop_reason=reason)).rowcount == 1:
                return True
            if self._set(set_id).started_at is None:
                raise ConflictError(f"recipe set {set_id} has not started: cancel it instead")
        return False

    def _set(self, set_id: int) -> Any:
        row = self.conn.execute(
            select(
                RecipeSets.started_at,
                RecipeSets.finished_at,
                RecipeSets.lab_id,
                RecipeSets.stop_reason,
            ).where(RecipeSets.id == set_id)
        ).one_or_none()
        if row is None:
            raise NotFoundError(f"no recipe set {set_id}")
        return row

    def _guarded(
        self, set_id: int, guard: list[ColumnElement[bool]], refusal: str, **values: Any
    ) -> None:
        stmt = update(RecipeSets).where(RecipeSets.id == set_id, *guard).values(**values)
        if self.conn.execute(stmt).rowcount != 1:
            self._set(set_id)
            raise ConflictError(f"recipe set {set_id} {refusal}")
