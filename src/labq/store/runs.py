"""Runs: creating one, the jobs in it with their counts, listing runs, cancelling one."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, func, insert, select
from sqlalchemy.exc import IntegrityError

from labq.domain.runs import check_name, count, job_status
from labq.errors import ConflictError, NotFoundError
from labq.store.base import Db
from labq.store.jobs import JobStore
from labq.store.queue import QueueStore
from labq.store.tables import Jobs, Runs, Users
from labq.store.views import JobView


@dataclass(frozen=True)
class RunSummary:
    """A run with how many of its jobs are queued, running, passed, failed or dead."""

    id: int
    name: str
    owner: str
    created_at: datetime
    meta: dict[str, Any]
    counts: dict[str, int]

    @property
    def total(self) -> int:
        """How many jobs the run has."""
        return sum(self.counts.values())


@dataclass(frozen=True)
class RunView:
    """A run and its jobs, in the order they were submitted."""

    summary: RunSummary
    jobs: tuple[JobView, ...]


class RunStore:
    """Runs group jobs submitted together; their counts are derived, never stored."""

    def __init__(self, db: Db, jobs: JobStore, queue: QueueStore) -> None:
        self.db = db
        self.conn = db.conn
        self.jobs = jobs
        self.queue = queue

    def create_run(
        self, name: str, *, owner: str, now: datetime, meta: dict[str, Any] | None = None
    ) -> int:
        """A new, empty run (jobs join it through ``submit_job(run_id=…)``); names are unique."""
        check_name(name)
        with self.db.atomic():
            owner_id = self.db.user_id(owner)
            if self._run_id(name) is not None:
                raise ConflictError(f"there is already a run named {name!r}")
            try:
                with self.conn.begin_nested():
                    stmt = insert(Runs).values(
                        name=name, owner_id=owner_id, created_at=now, meta=meta or {}
                    )
                    run_id = self.conn.execute(stmt.returning(Runs.id)).scalar_one()
            except IntegrityError:  # created by someone else since we looked
                raise ConflictError(f"there is already a run named {name!r}") from None
            self.db.log(now, owner, "run", "create", object_id=run_id, name=name)
        return run_id

    def list_runs(self, *, limit: int = 50, offset: int = 0) -> list[RunSummary]:
        """One page of runs, newest first, each with its counts."""
        rows = self.conn.execute(
            _RUN_COLUMNS.order_by(Runs.id.desc()).limit(limit).offset(offset)
        ).all()
        counts = self._counts([row.id for row in rows])
        return [_summary(row, counts[row.id]) for row in rows]

    def count_runs(self) -> int:
        """How many runs there are."""
        return int(self.conn.execute(select(func.count(Runs.id))).scalar_one())

    def load_run(self, name: str) -> RunView:
        """A run with every job in it (NotFoundError if there is none of that name)."""
        row = self.conn.execute(_RUN_COLUMNS.where(Runs.name == name)).one_or_none()
        if row is None:
            raise NotFoundError(f"no run named {name!r}")
        jobs = tuple(self.jobs.load_jobs(self._run_jobs(row.id)))
        counts = count(job_status(j.state, j.result) for j in jobs)
        return RunView(_summary(row, counts), jobs)

    def cancel_run(
        self, name: str, *, actor: str, now: datetime, reason: str | None = None
    ) -> dict[int, int]:
        """Cancel every unfinished job of the run; returns {job id: recipes cancelled} (>0)."""
        with self.db.atomic():
            run_id = self._run_id(name)
            if run_id is None:
                raise NotFoundError(f"no run named {name!r}")
            done = {}
            for job_id in self._run_jobs(run_id):
                cancelled = self.queue.cancel_job(job_id, actor=actor, now=now, reason=reason)
                if cancelled:
                    done[job_id] = cancelled
            if done:
                self.db.log(now, actor, "run", "cancel", object_id=run_id, name=name, reason=reason)
        return done

    def _run_id(self, name: str) -> int | None:
        return self.conn.execute(select(Runs.id).where(Runs.name == name)).scalar_one_or_none()

    def _run_jobs(self, run_id: int) -> list[int]:
        stmt = select(Jobs.id).where(Jobs.run_id == run_id).order_by(Jobs.id)
        return list(self.conn.execute(stmt).scalars())

    def _counts(self, run_ids: list[int]) -> dict[int, dict[str, int]]:
        """Counts per run from its jobs' derived states and results."""
        pairs = self.conn.execute(
            select(Jobs.id, Jobs.run_id).where(Jobs.run_id.in_(run_ids))
        ).all()
        loaded = {j.id: j for j in self.jobs.load_jobs([job_id for job_id, _ in pairs])}
        statuses: dict[int, list[str]] = defaultdict(list)
        for job_id, run_id in pairs:
            if run_id is None:  # never: the query asked for these runs
                continue
            job = loaded[job_id]
            statuses[run_id].append(job_status(job.state, job.result))
        return {run_id: count(statuses[run_id]) for run_id in run_ids}


_RUN_COLUMNS = select(
    Runs.id, Runs.name, Users.name.label("owner"), Runs.created_at, Runs.meta
).join(Users, Users.id == Runs.owner_id)


def _summary(
    row: Row[int, str, str, datetime, dict[str, Any]], counts: dict[str, int]
) -> RunSummary:
    run_id, name, owner, created_at, meta = row
    return RunSummary(run_id, name, owner, created_at, dict(meta), counts)
