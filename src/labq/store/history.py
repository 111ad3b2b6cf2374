"""How long past runs took: what the run-time predictions learn from.

One row per started set that ended, written when it ends (:meth:`HistoryStore.record_run`),
with the kind of work it was (the keys stored with the set when it was submitted, see
:mod:`labq.domain.runkind`), the job's owner and group, how long it ran and how it ended.
The scheduler reads back a bounded part of it when it rebuilds (:meth:`HistoryStore.recent`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from sqlalchemy import ColumnElement, Select, bindparam, func, insert, or_, select, update

from labq.domain.states import RecipeState
from labq.store.base import Db
from labq.store.tables import Groups, Jobs, Recipes, RecipeSets, RunHistory, Users

COMPLETED: Final = "completed"


@dataclass(frozen=True)
class PastRunRecord:
    """One finished run of a set, as the history keeps it."""

    set_id: int
    source: str | None
    work: str | None
    owner: str
    group: str | None
    seconds: float
    outcome: str  # completed, aborted or cancelled
    finished_at: datetime


@dataclass(frozen=True)
class SetKeys:
    """The keys a set's prediction is looked up by: its kinds, its job's owner and group."""

    source: str | None
    work: str | None
    owner: str
    group: str | None


class HistoryStore:
    """The history of finished runs, and the keys of the sets still to run."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def record_run(self, set_id: int, *, now: datetime) -> PastRunRecord | None:
        """Record how the set's run went, once its recipes have all ended; returns the row.

        None when the set never started (it has no run to learn from) or is recorded
        already (an end heard twice). A run is ``aborted`` if a recipe aborted,
        ``cancelled`` if one was cancelled, else ``completed``.
        """
        with self.db.atomic():
            if self.conn.execute(select(RunHistory.id).where(RunHistory.set_id == set_id)).first():
                return None
            row = self.conn.execute(
                _with_keys(RecipeSets.started_at, RecipeSets.finished_at).where(
                    RecipeSets.id == set_id
                )
            ).one()
            if row.started_at is None:
                return None
            ended = row.finished_at or now
            states = self.conn.execute(
                select(Recipes.state).where(Recipes.recipe_set_id == set_id)
            ).scalars()
            record = PastRunRecord(
                set_id=set_id,
                source=row.source_key,
                work=row.work_key,
                owner=row.owner,
                group=row.group,
                seconds=max(0.0, (ended - row.started_at).total_seconds()),
                outcome=_outcome(RecipeState(s) for s in states),
                finished_at=ended,
            )
            self.conn.execute(
                insert(RunHistory).values(
                    set_id=set_id,
                    source_key=record.source,
                    work_key=record.work,
                    owner=record.owner,
                    group=record.group,
                    seconds=record.seconds,
                    outcome=record.outcome,
                    finished_at=record.finished_at,
                )
            )
        return record

    def recent(self, per_key: int, *, completed_only: bool = True) -> list[PastRunRecord]:
        """The last ``per_key`` runs of each source, work, owner and group key, oldest first.

        Bounded, so a rebuild reads the same amount however long labq has kept history
        (at most four times ``per_key`` rows per distinct key).
        """
        return self._ranked(per_key, [], completed_only=completed_only)

    def for_keys(self, keys: Iterable[SetKeys], per_key: int) -> list[PastRunRecord]:
        """The last ``per_key`` completed runs of each key of ``keys``, oldest first: what
        the predictions of the sets with these keys rest on (one query)."""
        wanted = list(keys)
        if not wanted:
            return []
        given: list[tuple[Any, set[str | None]]] = [
            (RunHistory.source_key, {k.source for k in wanted}),
            (RunHistory.work_key, {k.work for k in wanted}),
            (RunHistory.owner, {k.owner for k in wanted}),
            (RunHistory.group, {k.group for k in wanted}),
        ]
        matches = [
            column.in_(sorted(v for v in values if v is not None))
            for column, values in given
            if values - {None}
        ]
        return self._ranked(per_key, [or_(*matches)])

    def _ranked(
        self, per_key: int, where: list[ColumnElement[bool]], *, completed_only: bool = True
    ) -> list[PastRunRecord]:
        if completed_only:
            where = [*where, RunHistory.outcome == COMPLETED]
        ranks = [
            func.row_number().over(partition_by=column, order_by=RunHistory.id.desc())
            for column in (
                RunHistory.source_key,
                RunHistory.work_key,
                RunHistory.owner,
                RunHistory.group,
            )
        ]
        ranked = select(
            RunHistory, *(rank.label(f"rank{i}") for i, rank in enumerate(ranks))
        ).where(*where)
        sub = ranked.subquery()
        stmt = (
            select(sub)
            .where(or_(*(sub.c[f"rank{i}"] <= per_key for i in range(len(ranks)))))
            .order_by(sub.c.id)
        )
        return [_record(r) for r in self.conn.execute(stmt)]

    def keep_predictions(self, predictions: Mapping[int, Mapping[str, Any] | None]) -> None:
        """Keep each set's prediction as the scheduler took it (set id → its fields; None:
        none, nothing kept)."""
        rows = [{"set_id": i, "kept": p} for i, p in sorted(predictions.items()) if p is not None]
        if not rows:
            return
        with self.db.atomic():
            stmt = (
                update(RecipeSets)
                .where(RecipeSets.id == bindparam("set_id"))
                .values(prediction=bindparam("kept"))
            )
            self.conn.execute(stmt, rows)

    def predictions_of(self, set_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """The kept predictions of these sets, by set (those that have one)."""
        wanted = sorted(set(set_ids))
        if not wanted:
            return {}
        stmt = select(RecipeSets.id, RecipeSets.prediction).where(
            RecipeSets.id.in_(wanted), RecipeSets.prediction.is_not(None)
        )
        return {int(i): dict(p) for i, p in self.conn.execute(stmt) if p is not None}

    def runs_of(self, set_ids: Iterable[int]) -> dict[int, PastRunRecord]:
        """The recorded runs of these sets, by set."""
        ids = list(set_ids)
        if not ids:
            return {}
        rows = self.conn.execute(select(RunHistory).where(RunHistory.set_id.in_(ids)))
        return {r.set_id: _record(r) for r in rows}

    def keys_of(self, set_ids: Iterable[int]) -> dict[int, SetKeys]:
        """The prediction keys of these sets, by set."""
        ids = list(set_ids)
        if not ids:
            return {}
        rows = self.conn.execute(_with_keys(RecipeSets.id).where(RecipeSets.id.in_(ids)))
        return {r.id: SetKeys(r.source_key, r.work_key, r.owner, r.group) for r in rows}


def _record(row: Any) -> PastRunRecord:
    return PastRunRecord(
        set_id=row.set_id,
        source=row.source_key,
        work=row.work_key,
        owner=row.owner,
        group=row.group,
        seconds=float(row.seconds),
        outcome=row.outcome,
        finished_at=row.finished_at,
    )


def _outcome(states: Iterable[RecipeState]) -> str:
    seen = set(states)
    if RecipeState.ABORTED in seen:
        return RecipeState.ABORTED.value
    if RecipeState.CANCELLED in seen:
        return RecipeState.CANCELLED.value
    return COMPLETED


def _with_keys(*columns: Any) -> Select[Any]:
    """Sets' ``columns`` with their prediction keys: source, work, owner and group."""
    return (
        select(
            *columns,
            RecipeSets.source_key,
            RecipeSets.work_key,
            Users.name.label("owner"),
            Groups.name.label("group"),
        )
        .join(Jobs, Jobs.id == RecipeSets.job_id)
        .join(Users, Users.id == Jobs.owner_id)
        .outerjoin(Groups, Groups.id == Jobs.group_id)
    )
