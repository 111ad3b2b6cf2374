"""Storing retries of recipe sets (seed 003); when to retry is the scheduler's policy."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from sqlalchemy import select, update

from labq.domain.states import RecipeState
from labq.errors import ConflictError, NotFoundError
from labq.store.base import Db
from labq.store.jobs import JobStore
from labq.store.queue import QueueStore
from labq.store.tables import RecipeSets


class RetryStore:
    """Cloning an ended recipe set onto its job, and the plain-words error a set carries."""

    def __init__(self, db: Db, jobs: JobStore, queue: QueueStore) -> None:
        self.db = db
        self.conn = db.conn
        self.jobs = jobs
        self.queue = queue

    def clone_recipe_set(
        self,
        set_id: int,
        *,
        actor: str,
        now: datetime,
        excluded: Mapping[int, Iterable[str]] | None = None,
    ) -> int:
        """Append a retry of an ended set to its job; returns the new set's id.

        The clone points at ``set_id`` (``retry_of``) with the next attempt
        number and is submitted at ``now``; its recipes start ``new``, and each
        aborted recipe's excludes gain the system it aborted on (excludes
        accumulate over attempts). ``excluded`` (recipe index → systems, as in
        the scheduler's ``Retry``) adds further excludes per recipe.
        A set is retried at most once: retry the latest attempt.
        """
        with self.db.atomic():
            original = self.jobs.get_recipe_set(set_id)
            if not original.state.is_final:
                raise ConflictError(f"recipe set {set_id} has not ended; it cannot be retried")
            if self.conn.execute(
                select(RecipeSets.id).where(RecipeSets.retry_of == set_id)
            ).first():
                raise ConflictError(f"recipe set {set_id} was already retried")
            native = original.spec.model_dump(mode="json")
            extra = excluded or {}
            unknown = set(extra) - set(range(len(original.recipes)))
            if unknown:
                raise ValueError(f"recipe set {set_id} has no recipe at index {min(unknown)}")
            for index, (recipe, view) in enumerate(
                zip(native["recipes"], original.recipes, strict=True)
            ):
                avoid = {*recipe["exclude"], *extra.get(index, ())}
                if view.state is RecipeState.ABORTED and view.system is not None:
                    avoid.add(view.system)
                recipe["exclude"] = sorted(avoid)
            job_id = self._job_of(set_id)
            clone = self.queue.insert_set(
                job_id, None, native, now=now, retry_of=set_id, attempt=original.attempt + 1
            )
            self.db.log(now, actor, "job", "retry set", object_id=job_id, old=set_id, new=clone)
        return clone

    def set_recipe_set_error(self, set_id: int, error: str | None) -> None:
        """Attach (or clear) the plain-words error of a set, e.g. why it was not retried."""
        with self.db.atomic():
            stmt = update(RecipeSets).where(RecipeSets.id == set_id).values(error=error)
            if self.conn.execute(stmt).rowcount != 1:
                raise NotFoundError(f"no recipe set {set_id}")

    def _job_of(self, set_id: int) -> int:
        stmt = select(RecipeSets.job_id).where(RecipeSets.id == set_id)
        return self.conn.execute(stmt).scalar_one()
