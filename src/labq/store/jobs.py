"""Reading jobs: one job, its sets and recipes, pages and selections of jobs, their states.

Every read of a job goes through this part. The rows are turned back into specs
and frozen views by :mod:`labq.store.loading`; the filters of a page are
:func:`labq.store.listing.filtered` and :func:`labq.store.selection.picked`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import Select, func, select

from labq.domain.states import RecipeState, derived_state
from labq.errors import NotFoundError
from labq.store.base import Db
from labq.store.jobstate import job_states
from labq.store.listing import MAX_PAGE, filtered
from labq.store.loading import load_jobs, load_recipes, load_sets
from labq.store.selection import MAX_SELECTED, JobLabel, JobQuery, picked
from labq.store.tables import Groups, Jobs, Recipes, RecipeSets, Runs, Users
from labq.store.views import JobView, RecipeSetView, RecipeView


class JobStore:
    """Loads jobs, sets and recipes with their specs rebuilt from the relational rows."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def load_job(self, job_id: int) -> JobView:
        """A stored job with every set (retries included) and recipe state."""
        found = load_jobs(self.conn, [job_id])
        if not found:
            raise NotFoundError(f"no job {job_id}")
        return found[0]

    def load_jobs(self, job_ids: Sequence[int]) -> list[JobView]:
        """These jobs (those that exist), in a handful of queries, in this order."""
        return load_jobs(self.conn, job_ids)

    def get_recipe(self, recipe_id: int) -> RecipeView:
        """One stored recipe."""
        found = load_recipes(self.conn, Recipes.id == recipe_id)
        if not found:
            raise NotFoundError(f"no recipe {recipe_id}")
        return found[0][0]

    def get_recipe_set(self, set_id: int) -> RecipeSetView:
        """One stored recipe set with its recipes."""
        found = load_sets(self.conn, RecipeSets.id == set_id)
        if not found:
            raise NotFoundError(f"no recipe set {set_id}")
        return found[0]

    def recipe_set_state(self, set_id: int) -> RecipeState:
        """A recipe set's state, derived from its recipes' states."""
        states = select(Recipes.state).where(Recipes.recipe_set_id == set_id)
        return self._derive(states, f"recipe set {set_id}")

    def job_state(self, job_id: int) -> RecipeState:
        """A job's state, derived from the recipes of each set's latest attempt."""
        found = job_states(self.conn, [job_id])
        if job_id not in found:
            raise NotFoundError(f"no job {job_id}")
        return found[job_id]

    def list_jobs(
        self,
        *,
        owner: str | None = None,
        group: str | None = None,
        state: RecipeState | None = None,
        submitted_after: datetime | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[JobView]:
        """One page of jobs, newest first; ``group="everybody"`` includes jobs naming none.

        Unknown owners or groups match nothing rather than raising.
        """
        if not 0 < limit <= MAX_PAGE or offset < 0:
            raise ValueError(f"limit must be 1..{MAX_PAGE} and offset >= 0")
        stmt = filtered(select(Jobs.id), owner, group, state, submitted_after)
        page = stmt.order_by(Jobs.id.desc()).limit(limit).offset(offset)
        return load_jobs(self.conn, list(self.conn.execute(page).scalars()))

    def count_jobs(
        self,
        *,
        owner: str | None = None,
        group: str | None = None,
        state: RecipeState | None = None,
        submitted_after: datetime | None = None,
    ) -> int:
        """How many jobs :meth:`list_jobs` would page through with the same filters."""
        stmt = filtered(select(func.count(Jobs.id)), owner, group, state, submitted_after)
        return int(self.conn.execute(stmt).scalar_one())

    def find_jobs(self, query: JobQuery, *, limit: int = 50, offset: int = 0) -> list[JobView]:
        """One page of the jobs a :class:`JobQuery` picks, newest first."""
        if not 0 < limit <= MAX_PAGE or offset < 0:
            raise ValueError(f"limit must be 1..{MAX_PAGE} and offset >= 0")
        stmt = picked(select(Jobs.id), query).order_by(Jobs.id.desc())
        page = self.conn.execute(stmt.limit(limit).offset(offset)).scalars()
        return load_jobs(self.conn, list(page))

    def count_found(self, query: JobQuery) -> int:
        """How many jobs it picks."""
        stmt = picked(select(func.count(Jobs.id)), query)
        return int(self.conn.execute(stmt).scalar_one())

    def select_job_ids(self, query: JobQuery, *, limit: int = MAX_SELECTED) -> list[int]:
        """Every job id it picks, oldest first (at most ``limit``)."""
        stmt = picked(select(Jobs.id), query).order_by(Jobs.id).limit(limit)
        return list(self.conn.execute(stmt).scalars())

    def run_names(self, job_ids: Iterable[int]) -> dict[int, str]:
        """The name of each job's run, for those submitted in one."""
        wanted = sorted(set(job_ids))
        if not wanted:
            return {}
        stmt = select(Jobs.id, Runs.name).join(Runs, Runs.id == Jobs.run_id)
        return {int(i): str(n) for i, n in self.conn.execute(stmt.where(Jobs.id.in_(wanted)))}

    def job_labels(self, job_ids: Iterable[int]) -> dict[int, JobLabel]:
        """Owner, group, whiteboard and run of each job that exists (one query)."""
        wanted = sorted(set(job_ids))
        if not wanted:
            return {}
        stmt = (
            select(Jobs.id, Users.name, Groups.name, Jobs.whiteboard, Runs.name)
            .join(Users, Users.id == Jobs.owner_id)
            .outerjoin(Groups, Groups.id == Jobs.group_id)
            .outerjoin(Runs, Runs.id == Jobs.run_id)
            .where(Jobs.id.in_(wanted))
        )
        return {row[0]: JobLabel(*row[1:]) for row in self.conn.execute(stmt)}

    def _derive(self, states: Select[str], what: str) -> RecipeState:
        found = [RecipeState(s) for s in self.conn.execute(states).scalars()]
        if not found:  # every set has a recipe: no states, no such set or job
            raise NotFoundError(f"no {what}")
        return derived_state(found)
