"""What accounting reads (``GET /usage``, ``labq usage``): busy time, ended recipes and
started sets in a window, and who and where each recipe was for."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, or_, select

from labq.domain.accounting import Busy, Ended, Served, Started
from labq.domain.states import Result, Usage
from labq.domain.usage import BUSY
from labq.store.base import Db
from labq.store.columns import epoch
from labq.store.tables import (
    Activity,
    Groups,
    Jobs,
    Labs,
    Pools,
    RecipeHistory,
    Recipes,
    RecipeSets,
    SystemPools,
    Systems,
    UsageHistory,
    Users,
)


@dataclass(frozen=True)
class AccountingRecords:
    """Everything :func:`labq.domain.accounting.report` adds up, for one window."""

    served: dict[int, Served]
    busy: list[Busy]
    ended: list[Ended]
    started: list[Started]
    pools: dict[str, frozenset[str]]


class AccountingStore:
    """The reads behind the usage report."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def accounting_records(self, start: datetime, end: datetime) -> AccountingRecords:
        """Busy stretches (clipped to ``[start, end)``), recipes that ended and sets that
        started in it, with each recipe's owner, group, system and lab."""
        lo, hi = epoch(start), epoch(end)
        busy_rows = self.conn.execute(
            select(UsageHistory.recipe_id, UsageHistory.started_at, UsageHistory.ended_at).where(
                UsageHistory.usage.in_([u.value for u in BUSY]),
                UsageHistory.recipe_id.is_not(None),
                UsageHistory.started_at < end,
                or_(UsageHistory.ended_at.is_(None), UsageHistory.ended_at > start),
            )
        ).all()
        busy = [
            Busy(
                int(r.recipe_id),
                max(lo, epoch(r.started_at)),
                min(hi, epoch(r.ended_at) if r.ended_at is not None else hi),
            )
            for r in busy_rows
        ]
        ended_rows = self.conn.execute(
            select(Recipes.id, Recipes.result).where(
                Recipes.finished_at >= start,
                Recipes.finished_at < end,
                Recipes.system_id.is_not(None),  # it ran (or was placed): not a queued cancel
            )
        ).all()
        ended = [Ended(r.id, r.result == Result.PASS.value) for r in ended_rows]
        started = self._started(start, end)
        wanted = {b.recipe for b in busy} | {e.recipe for e in ended}
        wanted |= {r for s in started for r in s.recipes}
        return AccountingRecords(self._served(wanted), busy, ended, started, self._pools())

    # --- what a replay of the window needs (labq sim export) ---------------------------

    def jobs_submitted(self, start: datetime, end: datetime) -> list[int]:
        """Jobs submitted in ``[start, end)``, oldest first."""
        stmt = (
            select(Jobs.id)
            .where(Jobs.submitted_at >= start, Jobs.submitted_at < end)
            .order_by(Jobs.submitted_at, Jobs.id)
        )
        return list(self.conn.execute(stmt).scalars())

    def job_actions(self, start: datetime, end: datetime) -> list[tuple[datetime, int, str, str]]:
        """Cancels and priority changes of jobs in ``[start, end)``: (at, job, action, new)."""
        stmt = (
            select(Activity.at, Activity.object_id, Activity.action, Activity.new_value)
            .where(
                Activity.object_kind == "job",
                Activity.action.in_(["cancel", "priority"]),
                Activity.at >= start,
                Activity.at < end,
                Activity.object_id.is_not(None),
            )
            .order_by(Activity.at, Activity.id)
        )
        return [(r[0], int(r[1] or 0), r[2], r[3] or "") for r in self.conn.execute(stmt)]

    def released_at(self, recipes: Iterable[int]) -> dict[int, datetime]:
        """When each recipe's system went back to the scheduler: the end of the ``pending``
        stretch that follows its last busy one (its supervisor finishing up and exiting,
        and the scheduler hearing it), or the end of that busy stretch."""
        ids = sorted(recipes)
        out: dict[int, datetime] = {}
        for chunk in (ids[i : i + 500] for i in range(0, len(ids), 500)):
            rows = self.conn.execute(
                select(
                    UsageHistory.recipe_id,
                    UsageHistory.system_id,
                    func.max(UsageHistory.ended_at),
                )
                .where(
                    UsageHistory.recipe_id.in_(chunk),
                    UsageHistory.usage.in_([u.value for u in BUSY]),
                )
                .group_by(UsageHistory.recipe_id, UsageHistory.system_id)
            ).all()
            ends = {int(r[0] or 0): (int(r[1]), r[2]) for r in rows if r[2] is not None}
            pending = self.conn.execute(
                select(
                    UsageHistory.system_id, UsageHistory.started_at, UsageHistory.ended_at
                ).where(
                    UsageHistory.system_id.in_({s for s, _t in ends.values()}),
                    UsageHistory.started_at.in_({t for _s, t in ends.values()}),
                    UsageHistory.usage == Usage.PENDING.value,
                    UsageHistory.ended_at.is_not(None),
                )
            ).all()
            after = {(int(r[0]), r[1]): r[2] for r in pending if r[2] is not None}
            for recipe, (system, busy_end) in ends.items():
                out[recipe] = after.get((system, busy_end)) or busy_end
        return out

    def taken_in_at(self, recipes: Iterable[int]) -> dict[int, datetime]:
        """When the scheduler first moved each recipe out of ``new``: the moment it took the
        recipe's job in, which follows the job's commit by its reaction time (none for a
        recipe it never saw)."""
        ids = sorted(recipes)
        out: dict[int, datetime] = {}
        for chunk in (ids[i : i + 500] for i in range(0, len(ids), 500)):
            rows = self.conn.execute(
                select(RecipeHistory.recipe_id, func.min(RecipeHistory.at))
                .where(RecipeHistory.recipe_id.in_(chunk), RecipeHistory.state != "new")
                .group_by(RecipeHistory.recipe_id)
            ).all()
            out.update({int(r[0]): r[1] for r in rows if r[1] is not None})
        return out

    def _started(self, start: datetime, end: datetime) -> list[Started]:
        rows = self.conn.execute(
            select(RecipeSets.id, RecipeSets.submitted_at, RecipeSets.started_at, Recipes.id)
            .join(Recipes, Recipes.recipe_set_id == RecipeSets.id)
            .where(RecipeSets.started_at >= start, RecipeSets.started_at < end)
            .order_by(RecipeSets.id)
        ).all()
        sets: dict[int, tuple[float, list[int]]] = {}
        for set_id, submitted, began, recipe in rows:
            if began is None:
                continue
            waited = max(0.0, epoch(began) - epoch(submitted))
            sets.setdefault(set_id, (waited, []))[1].append(recipe)
        return [Started(tuple(recipes), waited) for waited, recipes in sets.values()]

    def _served(self, recipes: Iterable[int]) -> dict[int, Served]:
        ids = sorted(recipes)
        out: dict[int, Served] = {}
        for chunk in (ids[i : i + 500] for i in range(0, len(ids), 500)):
            rows = self.conn.execute(
                select(
                    Recipes.id,
                    Jobs.id.label("job"),
                    Users.name.label("owner"),
                    Groups.name.label("group"),
                    Systems.fqdn,
                    Labs.name.label("lab"),
                )
                .join(RecipeSets, RecipeSets.id == Recipes.recipe_set_id)
                .join(Jobs, Jobs.id == RecipeSets.job_id)
                .join(Users, Users.id == Jobs.owner_id)
                .outerjoin(Groups, Groups.id == Jobs.group_id)
                .join(Systems, Systems.id == Recipes.system_id)
                .join(Labs, Labs.id == Systems.lab_id)
                .where(Recipes.id.in_(chunk))
            ).all()
            for r in rows:
                out[r.id] = Served(r.id, r.job, r.owner, r.group, r.fqdn, r.lab)
        return out

    def _pools(self) -> dict[str, frozenset[str]]:
        rows = self.conn.execute(
            select(Systems.fqdn, Pools.name)
            .join(SystemPools, SystemPools.system_id == Systems.id)
            .join(Pools, Pools.id == SystemPools.pool_id)
        ).all()
        out: dict[str, set[str]] = {}
        for fqdn, pool in rows:
            out.setdefault(fqdn, set()).add(pool)
        return {k: frozenset(v) for k, v in out.items()}
