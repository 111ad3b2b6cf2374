"""Choosing jobs by what people know of them: owner, group, state, whiteboard, run, lab, age.

The same :class:`JobQuery` pages ``job list`` and picks the jobs of a bulk
cancel or priority change, so both mean the same by each filter.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from sqlalchemy import ColumnElement, Select, func, select

from labq.domain.states import RecipeState
from labq.store.listing import MAX_PAGE, JobListing
from labq.store.tables import Groups, Jobs, Labs, RecipeSets, Runs, Users
from labq.store.views import JobView

MAX_SELECTED: Final = 10_000  # jobs one bulk request may change


@dataclass(frozen=True)
class JobQuery:
    """Filters that must all hold; None (or empty) filters nothing."""

    owner: str | None = None
    group: str | None = None  # "everybody" includes jobs naming no group
    state: RecipeState | None = None
    whiteboard: str | None = None  # a glob: * any text, ? one character; case ignored
    run: str | None = None
    lab: str | None = None  # a set of it started there
    submitted_before: datetime | None = None
    ids: tuple[int, ...] = ()

    def empty(self) -> bool:
        """Whether it filters nothing (a bulk change refuses that)."""
        return self == JobQuery()


@dataclass(frozen=True)
class JobLabel:
    """What people know a job by, besides its id."""

    owner: str | None
    group: str | None
    whiteboard: str | None
    run: str | None


class JobSelection(JobListing):
    """Pages of jobs, and every job id, that a :class:`JobQuery` picks."""

    def find_jobs(self, query: JobQuery, *, limit: int = 50, offset: int = 0) -> list[JobView]:
        """One page of the jobs it picks, newest first."""
        if not 0 < limit <= MAX_PAGE or offset < 0:
            raise ValueError(f"limit must be 1..{MAX_PAGE} and offset >= 0")
        stmt = self._picked(select(Jobs.id), query).order_by(Jobs.id.desc())
        return self._load_jobs(list(self.conn.execute(stmt.limit(limit).offset(offset)).scalars()))

    def count_found(self, query: JobQuery) -> int:
        """How many jobs it picks."""
        stmt = self._picked(select(func.count(Jobs.id)), query)
        return int(self.conn.execute(stmt).scalar_one())

    def select_job_ids(self, query: JobQuery, *, limit: int = MAX_SELECTED) -> list[int]:
        """Every job id it picks, oldest first (at most ``limit``)."""
        stmt = self._picked(select(Jobs.id), query).order_by(Jobs.id).limit(limit)
        return list(self.conn.execute(stmt).scalars())

    def load_jobs(self, job_ids: Sequence[int]) -> list[JobView]:
        """These jobs (those that exist), in a handful of queries, in this order."""
        return self._load_jobs(job_ids)

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

    def _picked(self, stmt: Select[int], query: JobQuery) -> Select[int]:
        stmt = self._filtered(stmt, query.owner, query.group, query.state, None)
        where: list[ColumnElement[bool]] = []
        if query.ids:
            where.append(Jobs.id.in_(sorted(set(query.ids))))
        if query.whiteboard is not None:
            where.append(Jobs.whiteboard.ilike(glob_to_like(query.whiteboard), escape="\\"))
        if query.run is not None:
            where.append(Jobs.run_id.in_(select(Runs.id).where(Runs.name == query.run)))
        if query.lab is not None:
            in_lab = select(RecipeSets.job_id).join(Labs, Labs.id == RecipeSets.lab_id)
            where.append(Jobs.id.in_(in_lab.where(Labs.name == query.lab)))
        if query.submitted_before is not None:
            where.append(Jobs.submitted_at < query.submitted_before)
        return stmt.where(*where)


def glob_to_like(pattern: str) -> str:
    """A shell glob as a LIKE pattern (escape ``\\``): ``nightly*`` → ``nightly%``."""
    out = []
    for char in pattern:
        if char in "\\%_":
            out.append("\\" + char)
        elif char == "*":
            out.append("%")
        elif char == "?":
            out.append("_")
        else:
            out.append(char)
    return "".join(out)
