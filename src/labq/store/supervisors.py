"""Started recipe sets and the supervisors that run them (seed 001, issue 4).

A set *starts* when the scheduler decides so (``Start``): it gets its lab and
``started_at`` while its recipes stay ``scheduled`` for the dispatcher. The
dispatcher records the supervisor it launched (pid and host, so a restarted
dispatcher can adopt or kill it); the supervisor heart-beats; the consistency
pass asks for the sets whose supervisor went quiet. Every write is a guarded
UPDATE that must change exactly one row.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, exists, select, update

from labq.domain.states import RecipeState
from labq.errors import ClaimLost, ConflictError, NotFoundError
from labq.store.base import Db
from labq.store.tables import Labs, Recipes, RecipeSets, Systems


class Beat(enum.Enum):
    """What a supervisor's heartbeat is answered."""

    CARRY_ON = "carry on"
    STOP = "stop"  # a stop was asked for: end the tasks, archive, report cancelled
    LOST = "lost"  # the claim is gone: stop at once and write nothing more


def untaken(set_id: int, claim: str) -> list[ColumnElement[bool]]:
    """The guard of taking a set up: its claim is still ``claim``, nobody took it up, and it
    has neither ended nor been asked to stop (a local supervisor's and a lab agent's alike)."""
    return [
        RecipeSets.id == set_id,
        RecipeSets.claim == claim,
        RecipeSets.supervisor_pid.is_(None),
        RecipeSets.finished_at.is_(None),
        RecipeSets.stop_reason.is_(None),
    ]


class Supervised(NamedTuple):
    """A started set taken up by a supervisor."""

    set_id: int
    claim: str
    pid: int
    host: str | None


class SupervisorStore:
    """Starting sets, recording supervisors, heartbeats, stale supervisors, stop requests."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def start_recipe_set(
        self, set_id: int, *, lab: str, now: datetime, claim: str | None = None
    ) -> bool:
        """Mark a set started in ``lab``: every recipe must hold a system of that lab.

        ``claim`` is the token of the one supervisor that may run it (see
        :meth:`claim_set`). False when it already started there (a repeat);
        ConflictError otherwise.
        """
        with self.db.atomic():
            lab_id = self.db.lab_id(lab)
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
            values: dict[str, Any] = {"started_at": now, "lab_id": lab_id}
            if claim is not None:
                values.update(claim=claim, heartbeat_at=now)
            if self.conn.execute(stmt.values(**values)).rowcount == 1:
                return True
            row = self._set(set_id)
            if row.started_at is not None and row.lab_id == lab_id:
                return False
            raise ConflictError(
                f"recipe set {set_id} cannot start in {lab}: it has started or ended already,"
                " or not every recipe holds a system there"
            )

    # --- claims: exactly one supervisor per started set --------------------------------

    def claim_set(
        self, set_id: int, claim: str, *, now: datetime, replacing: str | None = None
    ) -> bool:
        """Give a started, unfinished set to the supervisor that will carry ``claim``.

        With ``replacing`` None the set must be unclaimed; otherwise its claim must
        still be ``replacing`` and unconfirmed (no supervisor ever took it up: its
        launch was lost or is still on its way, and will then find it gone).
        False when the guard matched nothing: somebody else has the set.
        """
        guard: list[ColumnElement[bool]] = [
            RecipeSets.id == set_id,
            RecipeSets.started_at.is_not(None),
            RecipeSets.finished_at.is_(None),
            RecipeSets.supervisor_pid.is_(None),
        ]
        guard.append(
            RecipeSets.claim.is_(None) if replacing is None else RecipeSets.claim == replacing
        )
        stmt = update(RecipeSets).where(*guard).values(claim=claim, heartbeat_at=now)
        with self.db.atomic():
            return bool(self.conn.execute(stmt).rowcount == 1)

    def confirm_claim(self, set_id: int, claim: str, pid: int, host: str, *, now: datetime) -> None:
        """The supervisor carrying ``claim`` takes its set up: records its pid and host.

        Raises :class:`ClaimLost` unless the claim is still this one, unconfirmed,
        on a set that has neither ended nor been asked to stop.
        """
        stmt = (
            update(RecipeSets)
            .where(*untaken(set_id, claim))
            .values(supervisor_pid=pid, supervisor_host=host, heartbeat_at=now)
        )
        with self.db.atomic():
            if self.conn.execute(stmt).rowcount != 1:
                raise ClaimLost(f"recipe set {set_id}: {self._claim_refusal(set_id, claim)}")

    def guard_claim(self, set_id: int, claim: str) -> None:
        """Go on only while ``claim`` holds the unfinished set: the first statement of every
        transaction a supervisor writes in. Raises :class:`ClaimLost`.

        The UPDATE also locks the set's row until the transaction ends, so nobody can
        end the set or take the claim while the supervisor's write is on its way.
        """
        stmt = (
            update(RecipeSets)
            .where(
                RecipeSets.id == set_id,
                RecipeSets.claim == claim,
                RecipeSets.finished_at.is_(None),
            )
            .values(claim=claim)
        )
        if self.conn.execute(stmt).rowcount != 1:
            raise ClaimLost(f"recipe set {set_id}: {self._claim_refusal(set_id, claim)}")

    def lock_recipe_set(self, set_id: int) -> None:
        """Lock the set's row for the rest of the transaction (rows in one order everywhere:
        the set, then its recipes, then their systems)."""
        stmt = update(RecipeSets).where(RecipeSets.id == set_id).values(id=RecipeSets.id)
        if self.conn.execute(stmt).rowcount != 1:
            raise NotFoundError(f"no recipe set {set_id}")

    def claim_of(self, set_id: int) -> str | None:
        """The claim a started set is held under (None: unclaimed, or no such set)."""
        stmt = select(RecipeSets.claim).where(RecipeSets.id == set_id)
        return self.conn.execute(stmt).scalar_one_or_none()

    def heartbeat(self, set_id: int, *, now: datetime, claim: str) -> Beat:
        """The supervisor carrying ``claim`` is alive. Says whether to carry on, stop (a stop
        was asked for) or give up at once (the claim is gone: the set ended or was taken)."""
        with self.db.atomic():
            stmt = (
                update(RecipeSets)
                .where(
                    RecipeSets.id == set_id,
                    RecipeSets.claim == claim,
                    RecipeSets.supervisor_pid.is_not(None),
                    RecipeSets.finished_at.is_(None),
                )
                .values(heartbeat_at=now)
            )
            if self.conn.execute(stmt).rowcount != 1:
                self._set(set_id)  # NotFoundError for no such set
                return Beat.LOST
        return Beat.CARRY_ON if self._set(set_id).stop_reason is None else Beat.STOP

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

    def supervised_sets(self) -> list[Supervised]:
        """Started, unfinished sets whose supervisor took them up: set, claim, pid, host."""
        stmt = (
            select(
                RecipeSets.id,
                RecipeSets.claim,
                RecipeSets.supervisor_pid,
                RecipeSets.supervisor_host,
            )
            .where(
                RecipeSets.started_at.is_not(None),
                RecipeSets.finished_at.is_(None),
                RecipeSets.supervisor_pid.is_not(None),
            )
            .order_by(RecipeSets.id)
        )
        return [Supervised(r[0], r[1] or "", r[2] or 0, r[3]) for r in self.conn.execute(stmt)]

    def unsupervised_sets(
        self, *, lab: str | None = None, claimed_before: datetime | None = None
    ) -> list[tuple[int, str | None]]:
        """Started, unfinished sets no supervisor took up: ``(set, claim)``, the dispatcher's work.

        A claimed one is listed only if claimed before ``claimed_before`` (when given):
        its supervisor may still be on its way.
        """
        stmt = select(RecipeSets.id, RecipeSets.claim).where(
            RecipeSets.started_at.is_not(None),
            RecipeSets.finished_at.is_(None),
            RecipeSets.supervisor_pid.is_(None),
        )
        if claimed_before is not None:
            stmt = stmt.where(
                RecipeSets.claim.is_(None) | (RecipeSets.heartbeat_at < claimed_before)
            )
        if lab is not None:
            stmt = stmt.where(RecipeSets.lab_id.in_(select(Labs.id).where(Labs.name == lab)))
        return [(r[0], r[1]) for r in self.conn.execute(stmt.order_by(RecipeSets.id))]

    def request_stop(self, set_id: int, reason: str) -> bool:
        """Ask a started set's supervisor to stop (the scheduler's ``Stop``); its next
        heartbeat returns False. False when it was asked already or has ended;
        ConflictError if it never started.
        """
        with self.db.atomic():
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

    def _claim_refusal(self, set_id: int, claim: str) -> str:
        row = self.conn.execute(
            select(
                RecipeSets.claim,
                RecipeSets.supervisor_pid,
                RecipeSets.finished_at,
                RecipeSets.stop_reason,
            ).where(RecipeSets.id == set_id)
        ).one_or_none()
        if row is None:
            return "no such recipe set"
        if row.finished_at is not None:
            return "it has ended"
        if row.claim != claim:
            return "another supervisor holds it"
        if row.stop_reason is not None:
            return f"it was asked to stop: {row.stop_reason}"
        return f"a supervisor (pid {row.supervisor_pid}) has taken it up already"
