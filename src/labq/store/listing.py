"""Listing jobs with filters and pages, filtering on the derived state in SQL.

A job's state is derived from the recipes of each set's latest attempt
(:mod:`labq.store.jobstate`). That rule is a minimum over a code per recipe
state, so one ``GROUP BY`` gives every job's state, and the filter, the order
and the page all happen in the database.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from sqlalchemy import ColumnElement, Select, func, or_, select

from labq.domain.model import EVERYBODY
from labq.domain.states import RecipeState
from labq.store.jobstate import STATE_CODES, job_state_codes
from labq.store.loading import JobLoader
from labq.store.tables import Groups, Jobs, Users
from labq.store.views import JobView

MAX_PAGE: Final = 1000


class JobListing(JobLoader):
    """Pages of jobs, newest first, by owner, group and derived state."""

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
        stmt = self._filtered(select(Jobs.id), owner, group, state, submitted_after)
        page = stmt.order_by(Jobs.id.desc()).limit(limit).offset(offset)
        return self._load_jobs(list(self.conn.execute(page).scalars()))

    def count_jobs(
        self,
        *,
        owner: str | None = None,
        group: str | None = None,
        state: RecipeState | None = None,
        submitted_after: datetime | None = None,
    ) -> int:
        """How many jobs :meth:`list_jobs` would page through with the same filters."""
        stmt = self._filtered(select(func.count(Jobs.id)), owner, group, state, submitted_after)
        return int(self.conn.execute(stmt).scalar_one())

    def _filtered(
        self,
        stmt: Select[int],
        owner: str | None,
        group: str | None,
        state: RecipeState | None,
        submitted_after: datetime | None,
    ) -> Select[int]:
        where: list[ColumnElement[bool]] = []
        if owner is not None:
            where.append(Jobs.owner_id.in_(select(Users.id).where(Users.name == owner)))
        if group is not None:
            named = Jobs.group_id.in_(select(Groups.id).where(Groups.name == group))
            where.append(or_(named, Jobs.group_id.is_(None)) if group == EVERYBODY else named)
        if submitted_after is not None:
            where.append(Jobs.submitted_at > submitted_after)
        if state is not None:
            states = job_state_codes().subquery()
            stmt = stmt.join(states, states.c.job_id == Jobs.id)
            where.append(states.c.code == STATE_CODES[state])
        return stmt.where(*where)
