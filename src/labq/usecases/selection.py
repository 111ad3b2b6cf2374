"""Picking many jobs by filter for one change (Slurm's ``scancel -u alice``), and what the
change did to each: changed, refused and why, or left as it was.

Permissions apply per job, as for one job: the jobs the caller may not change are
left alone and listed with why; the others change together, in one transaction.
A dry run says what would happen and changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from labq.domain.events import Event
from labq.domain.states import RecipeState
from labq.errors import RequestError
from labq.store import JobView, Repository
from labq.store.selection import JobQuery


@dataclass(frozen=True)
class JobFilter:
    """Which jobs: every filter given must hold (ids too, when given)."""

    ids: tuple[int, ...] = ()
    owner: str | None = None
    group: str | None = None
    state: RecipeState | None = None
    whiteboard: str | None = None
    run: str | None = None
    lab: str | None = None
    older_than_s: float | None = None

    def query(self, now: datetime) -> JobQuery:
        """The store's query; refused (:class:`RequestError`) when it would pick every job."""
        before = None if self.older_than_s is None else now - timedelta(seconds=self.older_than_s)
        query = JobQuery(
            owner=self.owner,
            group=self.group,
            state=self.state,
            whiteboard=self.whiteboard,
            run=self.run,
            lab=self.lab,
            submitted_before=before,
            ids=self.ids,
        )
        if query.empty():
            raise RequestError("give job ids or at least one filter", place="ids")
        return query


def picked(repo: Repository, query: JobQuery) -> list[JobView]:
    """The jobs ``query`` picks, loaded whole."""
    return repo.jobs.load_jobs(repo.jobs.select_job_ids(query))


@dataclass(frozen=True)
class Changed:
    """A job changed (or, in a dry run, that would be): ``count`` recipes or sets (None in a
    dry run)."""

    job_id: int
    count: int | None


@dataclass(frozen=True)
class Refused:
    """A job the caller may not change this way, and why."""

    job_id: int
    reason: str


@dataclass(frozen=True)
class BulkOutcome:
    """How many jobs matched; which changed (or would), which were refused and why."""

    matched: int
    changed: Sequence[Changed]
    refused: Sequence[Refused]
    dry_run: bool
    events: Sequence[Event] = field(default=())  # to post once committed

    @property
    def unchanged(self) -> int:
        """Jobs matched that neither changed nor were refused."""
        return self.matched - len(self.changed) - len(self.refused)
