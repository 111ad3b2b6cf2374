"""What the scheduler rebuilds itself from at start: systems and every unfinished set.

Three queries for the sets however many there are (sets, recipes, excludes),
all through the partial index on unfinished sets.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from typing import NamedTuple

from sqlalchemy import ColumnElement, Select, exists, select
from sqlalchemy.orm import aliased

from labq.domain import requirements
from labq.domain.contention import LockNeeds
from labq.domain.distro import requirement_of
from labq.domain.locks import parse_locks
from labq.domain.model import System
from labq.domain.priority import Priority
from labq.domain.reservesys import may_keep
from labq.domain.states import RecipeState, Usage
from labq.store.admission import AdmissionStore
from labq.store.base import Db
from labq.store.jobstate import retry_owed_clause
from labq.store.systems import SystemStore
from labq.store.tables import (
    Groups,
    Jobs,
    Labs,
    RecipeExcludes,
    Recipes,
    RecipeSets,
    Systems,
    Users,
)
from labq.store.views import UnfinishedRecipe, UnfinishedSet


class Placed(NamedTuple):
    """Where one recipe of an unfinished set stands in the database."""

    set_id: int
    recipe_id: int
    state: RecipeState
    system: str | None
    started: bool


class RestoreStore:
    """Reads for the scheduler's rebuild: systems in the order added, unfinished sets."""

    def __init__(self, db: Db, admission: AdmissionStore, systems: SystemStore) -> None:
        self.db = db
        self.conn = db.conn
        self.admission = admission
        self.systems = systems

    def systems_as_added(self) -> list[System]:
        """Every system, in the order they were added (the scheduler's own order)."""
        return self.systems.load_systems(order=Systems.id)

    def pending_systems(self) -> list[str]:
        """Free systems still waiting for the pending-system event (left by a crash)."""
        stmt = (
            select(Systems.fqdn)
            .where(Systems.usage == Usage.PENDING.value, Systems.recipe_id.is_(None))
            .order_by(Systems.id)
        )
        return list(self.conn.execute(stmt).scalars())

    def unfinished_sets(
        self, *, set_ids: Collection[int] | None = None, jobs: Collection[int] | None = None
    ) -> list[UnfinishedSet]:
        """Every set with a recipe that has not ended (or only those of ``set_ids``, or of
        ``jobs``), by id."""
        where: list[ColumnElement[bool]] = [RecipeSets.finished_at.is_(None)]
        if set_ids is not None:
            where.append(RecipeSets.id.in_(list(set_ids)))
        if jobs is not None:
            where.append(RecipeSets.job_id.in_(list(jobs)))
        return self._restorable(where)

    def ended_sets_owing_retry(self) -> list[UnfinishedSet]:
        """Sets that ended with a recipe aborted on a system, none cancelled, within their
        ``max_retries``, with neither a clone nor an error: the scheduler never decided
        their retry (it was not told they ended). Their recipes are all final."""
        clone = aliased(RecipeSets)
        superseded = exists().where(clone.retry_of == RecipeSets.id)
        return self._restorable([retry_owed_clause(), ~superseded])

    def _restorable(self, where: list[ColumnElement[bool]]) -> list[UnfinishedSet]:
        chosen = select(RecipeSets.id).where(*where)
        recipes = self._unfinished_recipes(chosen)
        rows = self.conn.execute(
            select(
                RecipeSets.id,
                RecipeSets.job_id,
                Groups.name.label("group"),
                RecipeSets.priority,
                RecipeSets.submitted_at,
                RecipeSets.max_time,
                RecipeSets.max_retries,
                RecipeSets.attempt,
                RecipeSets.retry_of,
                Labs.name.label("lab"),
                RecipeSets.started_at,
                RecipeSets.locks,
                RecipeSets.source_key,
                RecipeSets.work_key,
                RecipeSets.prediction,
                Users.name.label("owner"),
            )
            .join(Jobs, Jobs.id == RecipeSets.job_id)
            .join(Users, Users.id == Jobs.owner_id)
            .outerjoin(Groups, Groups.id == Jobs.group_id)
            .outerjoin(Labs, Labs.id == RecipeSets.lab_id)
            .where(*where)
            .order_by(RecipeSets.id)
        ).all()
        admitted = self.admission.admission_of(
            {row.job_id for row in rows}
        )  # dependencies, filters
        return [
            UnfinishedSet(
                id=row.id,
                job=row.job_id,
                group=row.group,
                priority=Priority.parse(row.priority),
                submitted_at=row.submitted_at,
                max_time=row.max_time,
                max_retries=row.max_retries,
                attempt=row.attempt,
                retry_of=row.retry_of,
                lab=row.lab,
                started_at=row.started_at,
                recipes=tuple(recipes[row.id]),
                locks=LockNeeds.of(parse_locks(row.locks)),
                blocked=None if row.started_at is not None else admitted[row.job_id].blocked,
                buckets=admitted[row.job_id].buckets,
                source_key=row.source_key,
                work_key=row.work_key,
                owner=row.owner,
                prediction=row.prediction,
            )
            for row in rows
        ]

    def unfinished_placements(self) -> list[Placed]:
        """Every recipe of an unfinished set: its set, state and system, and whether the set
        started — what the consistency pass compares with the scheduler's memory (one query)."""
        stmt = (
            select(
                Recipes.recipe_set_id,
                Recipes.id,
                Recipes.state,
                Systems.fqdn,
                RecipeSets.started_at.is_not(None).label("started"),
            )
            .join(RecipeSets, RecipeSets.id == Recipes.recipe_set_id)
            .outerjoin(Systems, Systems.id == Recipes.system_id)
            .where(RecipeSets.finished_at.is_(None))
            .order_by(Recipes.recipe_set_id, Recipes.position)
        )
        return [
            Placed(r[0], r[1], RecipeState(r[2]), r[3], bool(r[4])) for r in self.conn.execute(stmt)
        ]

    def _unfinished_recipes(self, chosen: Select[int]) -> dict[int, list[UnfinishedRecipe]]:
        in_chosen = Recipes.recipe_set_id.in_(chosen)
        excludes: dict[int, set[str]] = defaultdict(set)
        for recipe_id, fqdn in self.conn.execute(
            select(RecipeExcludes.recipe_id, RecipeExcludes.fqdn)
            .join(Recipes, Recipes.id == RecipeExcludes.recipe_id)
            .where(in_chosen)
        ):
            excludes[recipe_id].add(fqdn)
        out: dict[int, list[UnfinishedRecipe]] = defaultdict(list)
        for row in self.conn.execute(
            select(
                Recipes.id,
                Recipes.recipe_set_id,
                Recipes.position,
                Recipes.role,
                Recipes.host,
                Recipes.force,
                Recipes.state,
                Systems.fqdn,
                Recipes.scheduled_at,
                Recipes.meta,
            )
            .outerjoin(Systems, Systems.id == Recipes.system_id)
            .where(in_chosen)
            .order_by(Recipes.recipe_set_id, Recipes.position)
        ):
            out[row.recipe_set_id].append(
                UnfinishedRecipe(
                    id=row.id,
                    position=row.position,
                    role=row.role,
                    requirement=requirements.parse(row.host),
                    excluded=frozenset(excludes[row.id]),
                    force=row.force,
                    state=RecipeState(row.state),
                    system=row.fqdn,
                    scheduled_at=row.scheduled_at,
                    distro=requirement_of(row.meta),
                    keeps=may_keep(row.meta),
                )
            )
        return out
