"""Choosing jobs by what people know of them: owner, group, state, whiteboard, run, lab, age.

The same :class:`JobQuery` pages ``job list`` and picks the jobs of a bulk
cancel or priority change, so both mean the same by each filter.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from sqlalchemy import ColumnElement, Select, select

from labq.domain.states import RecipeState
from labq.store.listing import filtered
from labq.store.tables import Jobs, Labs, RecipeSets, Runs

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


def picked(stmt: Select[int], query: JobQuery) -> Select[int]:
    """``stmt`` narrowed to the jobs ``query`` picks."""
    stmt = filtered(stmt, query.owner, query.group, query.state, None)
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
