"""The queue of jobs: submitting one in a single transaction, cancelling it, reordering it.

A job is stored relationally (sets, recipes, excludes, tasks: what the
scheduler queries) and also as its canonical JSON, kept for audit only; loading
rebuilds the spec from the rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import exists, func, insert, select, update
from sqlalchemy.orm import aliased

from labq.domain.job import JobSpec
from labq.domain.priority import Priority
from labq.domain.runkind import SetKinds, set_kinds
from labq.domain.states import FINAL_RECIPE_STATES, RecipeState
from labq.errors import InputError, NotFoundError
from labq.store.base import Db
from labq.store.columns import values_of
from labq.store.jobstate import retry_owed_clause
from labq.store.moves import RecipeMoves
from labq.store.packing import TASK_COLUMNS, pack
from labq.store.people import PeopleStore
from labq.store.tables import (
    Groups,
    Jobs,
    RecipeExcludes,
    RecipeHistory,
    Recipes,
    RecipeSets,
    Tasks,
)


class QueueStore:
    """Submitting jobs, cancelling them, changing their priority; reading is :class:`JobStore`."""

    def __init__(self, db: Db, people: PeopleStore, moves: RecipeMoves) -> None:
        self.db = db
        self.conn = db.conn
        self.people = people
        self.moves = moves

    def submit_job(
        self,
        spec: JobSpec,
        *,
        owner: str,
        now: datetime,
        source_format: str,
        run_id: int | None = None,
    ) -> int:
        """Store a whole job in one step and return its id; recipes start ``new``.

        ``owner`` (the authenticated submitter) must exist and, when the job
        names a group, belong to it. ``run_id`` puts it in a run
        (:meth:`~labq.store.runs.RunStore.create_run`). Nothing is stored if anything fails.
        """
        with self.db.atomic():
            user = self.people.get_user(owner)
            group_id = None
            if spec.group is not None:
                group_id = self._job_group(spec.group)
                if not user.member_of(spec.group):
                    raise InputError(
                        f"user {owner!r} is not a member of group {spec.group!r}", place="group"
                    )
            # Rows are made from the canonical (JSON-safe) form the domain validated.
            canonical = spec.canonical()
            job_id = self._insert_job(
                canonical, self.db.user_id(owner), group_id, now, source_format
            )
            if run_id is not None:
                self.conn.execute(update(Jobs).where(Jobs.id == job_id).values(run_id=run_id))
            for position, recipe_set in enumerate(canonical["recipe_sets"]):
                kinds = set_kinds(canonical, position, recipe_set)
                self.insert_set(job_id, position, recipe_set, now=now, kinds=kinds)
            self.db.log(now, owner, "job", "submit", object_id=job_id, new=source_format)
        return job_id

    def cancel_job(
        self, job_id: int, *, actor: str, now: datetime, reason: str | None = None
    ) -> int:
        """Cancel a job; returns how many recipes it cancelled or asked to stop (0: none).

        Sets not started yet end ``cancelled`` at once. Started sets are asked to
        stop: their supervisor stops the tasks (``warn``, ``cancelled``), archives
        the logs, and only then ends the recipes ``cancelled`` and lets the systems
        go. Either way the set keeps the reason (``cancelled`` when none is given)
        as its ``stop_reason``.
        """
        with self.db.atomic():
            self._require_job(job_id)
            sets = self.conn.execute(
                select(RecipeSets.id, RecipeSets.started_at)
                .where(
                    RecipeSets.job_id == job_id,
                    RecipeSets.finished_at.is_(None),
                    RecipeSets.stop_reason.is_(None),
                )
                .order_by(RecipeSets.id)
            ).all()
            count = 0
            for set_id, started_at in sets:
                unfinished = self._open_recipes(set_id)
                if started_at is None:
                    for recipe_id in unfinished:
                        self.moves.move_recipe(
                            recipe_id, RecipeState.CANCELLED, now=now, reason=reason
                        )
                stmt = update(RecipeSets).where(RecipeSets.id == set_id)
                self.conn.execute(stmt.values(stop_reason=reason or "cancelled"))
                count += len(unfinished)
            self._no_retries_after_cancel(job_id, reason or "cancelled")
            if count:
                self.db.log(now, actor, "job", "cancel", object_id=job_id, reason=reason)
        return count

    def _no_retries_after_cancel(self, job_id: int, reason: str) -> None:
        """Sets of the job that ended owing a retry the scheduler has not made yet (it has
        not heard they ended) never get one: say so where the scheduler and the job's
        state look."""
        clone = aliased(RecipeSets)
        self.conn.execute(
            update(RecipeSets)
            .where(
                RecipeSets.job_id == job_id,
                retry_owed_clause(),
                ~exists().where(clone.retry_of == RecipeSets.id),
            )
            .values(error=f"not re-scheduled: the job was cancelled ({reason})")
        )

    def _open_recipes(self, set_id: int) -> list[int]:
        stmt = (
            select(Recipes.id)
            .where(
                Recipes.recipe_set_id == set_id,
                Recipes.state.not_in(values_of(FINAL_RECIPE_STATES)),
            )
            .order_by(Recipes.id)
        )
        return list(self.conn.execute(stmt).scalars())

    def change_priority(
        self, job_id: int, priority: Priority, *, actor: str, now: datetime
    ) -> list[int]:
        """Set the nominal priority of the job's sets that still wait; returns their ids.

        Started and ended sets keep theirs, as the scheduler's ``change_priority``
        does; tell it the same sets.
        """
        with self.db.atomic():
            self._require_job(job_id)
            waiting = list(
                self.conn.execute(
                    update(RecipeSets)
                    .where(
                        RecipeSets.job_id == job_id,
                        RecipeSets.started_at.is_(None),
                        RecipeSets.finished_at.is_(None),
                        RecipeSets.priority != priority.label,
                    )
                    .values(priority=priority.label)
                    .returning(RecipeSets.id)
                ).scalars()
            )
            if waiting:
                self.db.log(now, actor, "job", "priority", object_id=job_id, new=priority.label)
        return sorted(waiting)

    def _job_group(self, name: str) -> int:
        found = self.conn.execute(select(Groups.id).where(Groups.name == name)).scalar()
        if found is None:
            raise InputError(f"there is no group {name!r}", place="group")
        return found

    def _insert_job(
        self, job: Mapping[str, Any], owner_id: int, group_id: int | None, now: datetime, fmt: str
    ) -> int:
        ref = job["ref"] or {}
        stmt = insert(Jobs).values(
            owner_id=owner_id,
            group_id=group_id,
            whiteboard=job["whiteboard"],
            submitted_at=now,
            ref_repo=ref.get("repo"),
            ref_branch=ref.get("branch"),
            ref_commit=ref.get("commit"),
            source_format=fmt,
            depends=job["depends"],
            reason=job["reason"],
            meta=job["metadata"],
            spec=job,
        )
        return self.conn.execute(stmt.returning(Jobs.id)).scalar_one()

    def insert_set(
        self,
        job_id: int,
        position: int | None,
        recipe_set: Mapping[str, Any],
        *,
        now: datetime,
        retry_of: int | None = None,
        attempt: int = 1,
        kinds: SetKinds | None = None,
    ) -> int:
        """Insert a set from its canonical (native JSON) form; ``position`` None appends.

        ``kinds``: what kind of work it is (:mod:`labq.domain.runkind`); a retry is the
        kind of work its original was.
        """
        if kinds is None and retry_of is not None:
            keys = select(RecipeSets.source_key, RecipeSets.work_key)
            row = self.conn.execute(keys.where(RecipeSets.id == retry_of)).one()
            kinds = SetKinds(row.source_key, row.work_key)
        if position is None:
            last = select(func.max(RecipeSets.position)).where(RecipeSets.job_id == job_id)
            position = (self.conn.execute(last).scalar() or 0) + 1
        set_id = self.conn.execute(
            insert(RecipeSets)
            .values(
                job_id=job_id,
                position=position,
                priority=recipe_set["priority"],
                max_retries=recipe_set["max_retries"],
                max_time=recipe_set["max_time"],
                locks=recipe_set["locks"],
                retry_of=retry_of,
                attempt=attempt,
                submitted_at=now,
                source_key=None if kinds is None else kinds.source,
                work_key=None if kinds is None else kinds.work,
            )
            .returning(RecipeSets.id)
        ).scalar_one()
        self._insert_recipes(set_id, recipe_set["recipes"], now)
        return set_id

    def _insert_recipes(
        self, set_id: int, recipes: Sequence[Mapping[str, Any]], now: datetime
    ) -> None:
        packed = [pack(recipe) for recipe in recipes]
        rows = [
            {
                "recipe_set_id": set_id,
                "position": position,
                "role": recipe["role"],
                "host": recipe["host"],
                "force": recipe["force"],
                "state": RecipeState.NEW.value,
                "whiteboard": recipe["whiteboard"],
                "meta": meta,
            }
            for position, (recipe, (meta, _)) in enumerate(zip(recipes, packed, strict=True))
        ]
        stmt = insert(Recipes).returning(Recipes.id, sort_by_parameter_order=True)
        ids = self.conn.execute(stmt, rows).scalars().all()
        excludes = [
            {"recipe_id": rid, "fqdn": fqdn}
            for rid, recipe in zip(ids, recipes, strict=True)
            for fqdn in sorted(set(recipe["exclude"]))  # a set: duplicates say nothing more
        ]
        tasks = [
            {
                "recipe_id": rid,
                "position": position,
                "status": "new",
                **{k: task[k] for k in TASK_COLUMNS},
            }
            for rid, (_, task_list) in zip(ids, packed, strict=True)
            for position, task in enumerate(task_list)
        ]
        self.conn.execute(
            insert(RecipeHistory),
            [{"recipe_id": rid, "state": RecipeState.NEW.value, "at": now} for rid in ids],
        )
        if excludes:
            self.conn.execute(insert(RecipeExcludes), excludes)
        if tasks:
            self.conn.execute(insert(Tasks), tasks)

    def _require_job(self, job_id: int) -> None:
        if self.conn.execute(select(Jobs.id).where(Jobs.id == job_id)).first() is None:
            raise NotFoundError(f"no job {job_id}")
