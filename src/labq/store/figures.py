"""Counts and time series for ``/metrics`` and the charts, read in a few queries each."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from sqlalchemy import and_, case, func, or_, select

from labq.domain.states import RecipeState
from labq.store.base import Db
from labq.store.jobstate import STATE_CODES
from labq.store.tables import Labs, Recipes, RecipeSets, Systems


class QueuedSet(NamedTuple):
    """A set neither started nor ended, and the lab it holds systems in (None: none)."""

    id: int
    job_id: int
    priority: str
    submitted_at: datetime
    lab: str | None


class SetTotals(NamedTuple):
    """Sets started and retried since the database began, and those ended by outcome."""

    started: int
    retried: int
    ended: dict[RecipeState, int]


class Stay(NamedTuple):
    """When a set was submitted, started and ended (None: not yet)."""

    submitted_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class FigureStore:
    """What the metrics and the charts count, straight from the tables."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def queued_sets(self) -> list[QueuedSet]:
        """Sets neither started nor ended, each with the first lab it holds systems in."""
        held = (
            select(Recipes.recipe_set_id.label("set_id"), func.min(Labs.name).label("lab"))
            .join(Systems, Systems.recipe_id == Recipes.id)
            .join(Labs, Labs.id == Systems.lab_id)
            .group_by(Recipes.recipe_set_id)
            .subquery()
        )
        stmt = (
            select(RecipeSets.id, RecipeSets.job_id, RecipeSets.priority, RecipeSets.submitted_at)
            .add_columns(held.c.lab)
            .outerjoin(held, held.c.set_id == RecipeSets.id)
            .where(RecipeSets.started_at.is_(None), RecipeSets.finished_at.is_(None))
        )
        return [QueuedSet(*row) for row in self.conn.execute(stmt)]

    def system_counts(self) -> dict[tuple[str, str, str], int]:
        """How many systems each ``(lab, condition, usage)`` has (those with none left out)."""
        stmt = (
            select(Labs.name, Systems.condition, Systems.usage, func.count())
            .join(Labs, Labs.id == Systems.lab_id)
            .group_by(Labs.name, Systems.condition, Systems.usage)
        )
        return {(lab, c, u): n for lab, c, u, n in self.conn.execute(stmt)}

    def set_totals(self) -> SetTotals:
        """Sets started, retried (clones with ``retry_of``) and ended, by derived outcome.

        A set's outcome is its derived state: aborted if a recipe aborted, else
        cancelled if one was, else completed (the rule of ``GET /jobs/{id}``).
        """
        started, retried = self.conn.execute(
            select(func.count(RecipeSets.started_at), func.count(RecipeSets.retry_of))
        ).one()
        code = case({s.value: c for s, c in STATE_CODES.items()}, value=Recipes.state)
        per_set = (
            select(func.min(code).label("code"))
            .select_from(RecipeSets)
            .join(Recipes, Recipes.recipe_set_id == RecipeSets.id)
            .where(RecipeSets.finished_at.is_not(None))
            .group_by(RecipeSets.id)
            .subquery()
        )
        by_code = select(per_set.c.code, func.count()).group_by(per_set.c.code)
        counts = {int(c): int(n) for c, n in self.conn.execute(by_code)}
        ended = {s: counts[c] for s, c in STATE_CODES.items() if c in counts}
        return SetTotals(int(started), int(retried), ended)

    def queue_stays(self, start: datetime, end: datetime) -> list[Stay]:
        """The sets submitted by ``end`` that were still queued, or left it, after ``start``.

        A set leaves the queue when it starts, or when it ends without starting.
        """
        left = RecipeSets.started_at.is_not(None)
        stmt = select(RecipeSets.submitted_at, RecipeSets.started_at, RecipeSets.finished_at).where(
            RecipeSets.submitted_at <= end,
            or_(
                and_(left, RecipeSets.started_at >= start),
                and_(~left, or_(RecipeSets.finished_at.is_(None), RecipeSets.finished_at >= start)),
            ),
        )
        return [Stay(*row) for row in self.conn.execute(stmt)]
