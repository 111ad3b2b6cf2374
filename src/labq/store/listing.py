"""Listing jobs with filters and pages, filtering on the derived state in SQL.

A job's state is derived from the recipes of each set's latest attempt
(:mod:`labq.store.jobstate`). That rule is a minimum over a code per recipe
state, so one ``GROUP BY`` gives every job's state, and the filter, the order
and the page all happen in the database.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from sqlalchemy import ColumnElement, Select, or_, select

from labq.domain.model import EVERYBODY
from labq.domain.states import RecipeState
from labq.store.jobstate import STATE_CODES, job_state_codes
from labq.store.tables import Groups, Jobs, Users

MAX_PAGE: Final = 1000


def filtered(
    stmt: Select[int],
    owner: str | None,
    group: str | None,
    state: RecipeState | None,
    submitted_after: datetime | None,
) -> Select[int]:
    """``stmt`` narrowed to the jobs of this owner, group, state and age (None: any)."""
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
