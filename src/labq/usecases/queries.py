"""What the job list and the queue show, for the API and the pages alike.

Both show who owns a job, its whiteboard and run, how long it waited or has
run, and what it waits for in plain words (the scheduler's reason, never a bare
"its turn"); both take the same filters (``squeue``'s ``-u``, ``-A``, ``-p``,
``-t``). The queue itself is the scheduler's (its ``queue_view()``): the adapter
asks for it and hands it here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import Field, asdict, dataclass
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any, ClassVar, Protocol

from labq.domain.model import EVERYBODY
from labq.domain.queue import SetForecast
from labq.domain.states import RecipeState
from labq.store import JobView, Repository
from labq.store.selection import JobLabel, JobQuery
from labq.usecases.forecasts import forecast_json, forecasts_of

_UNKNOWN = JobLabel(owner=None, group=None, whiteboard=None, run=None)  # not stored (a test's)


class QueuedSet(Protocol):
    """One row of the scheduler's queue view (a ``QueueRow``): what these reads use of it."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    @property
    def set_id(self) -> int:
        """The set."""

    @property
    def job_id(self) -> int:
        """The job the set belongs to."""

    @property
    def lab(self) -> str | None:
        """The lab it is placed in (None: not yet)."""

    @property
    def labs(self) -> tuple[str, ...]:
        """Where systems matching its recipes are (not yet placed)."""

    @property
    def state(self) -> str:
        """Its least advanced recipe's state."""

    @property
    def reason(self) -> str:
        """What it waits for in plain words."""

    @property
    def waits_for(self) -> str | None:
        """What makes it ineligible now."""


@dataclass(frozen=True)
class JobsFound:
    """A page of jobs, how many match in all, and each one's run and listing row."""

    total: int
    jobs: list[JobView]
    rows: dict[int, dict[str, Any]]


def find_jobs(
    repo: Repository,
    query: JobQuery,
    *,
    limit: int,
    offset: int,
    now: datetime,
    queue: Callable[[], Sequence[QueuedSet]] = list,
    forecasts: Callable[[], Mapping[int, SetForecast]] = dict,
) -> JobsFound:
    """A page of the jobs ``query`` picks, newest first, with what ``job list`` shows of each
    (``queue``: the scheduler's view, asked for only when a job is shown, for why it waits;
    ``forecasts``: the scheduler's forecasts, likewise, for its unfinished sets')."""
    total = repo.jobs.count_found(query)
    page = repo.jobs.find_jobs(query, limit=limit, offset=offset)
    runs = repo.jobs.run_names(j.id for j in page)
    reasons = reasons_by_job(queue()) if page else {}
    known = forecasts() if page else {}
    rows = {
        j.id: {
            **job_row(j, now, runs.get(j.id), reasons.get(j.id)),
            "forecasts": forecasts_of(known, (s.id for s in j.current_sets)),
        }
        for j in page
    }
    return JobsFound(total, page, rows)


def timing(job: JobView, now: datetime) -> tuple[float | None, float | None]:
    """(waited, elapsed) seconds: queued until its first start; from it to its end or now.

    A job that ended without starting waited for nothing people can use: None.
    """
    sets = job.current_sets
    starts = [s.started_at for s in sets if s.started_at is not None]
    if not starts:
        return (None if job.state.is_final else _seconds(now - job.submitted_at)), None
    first = min(starts)
    ends = [s.finished_at for s in sets]
    last = max(e for e in ends if e is not None) if all(ends) and job.state.is_final else now
    return _seconds(first - job.submitted_at), _seconds(last - first)


def _seconds(delta: Any) -> float:
    return max(0.0, round(float(delta.total_seconds()), 1))


def reasons_by_job(view: Iterable[QueuedSet]) -> dict[int, str]:
    """The reason of each job's best-placed waiting set."""
    found: dict[int, str] = {}
    for row in view:
        found.setdefault(row.job_id, row.reason or row.waits_for or "")
    return found


def job_row(job: JobView, now: datetime, run: str | None, reason: str | None) -> dict[str, Any]:
    """What ``job list`` shows of one job, past the summary."""
    waited, elapsed = timing(job, now)
    waiting = job.state in (RecipeState.NEW, RecipeState.QUEUED, RecipeState.SCHEDULED)
    return {
        "run": run,
        "waited_s": waited,
        "elapsed_s": elapsed,
        "reason": reason if waiting else None,
    }


def queue_rows(
    repo: Repository,
    view: Sequence[QueuedSet],
    *,
    owner: str | None = None,
    group: str | None = None,
    lab: str | None = None,
    state: RecipeState | None = None,
    whiteboard: str | None = None,
    run: str | None = None,
    forecasts: Mapping[int, SetForecast] | None = None,
) -> list[dict[str, Any]]:
    """The queue's rows with owner, group, whiteboard and run, keeping those that match;
    each with its ``forecast`` (:func:`~labq.usecases.forecasts.forecast_json`, None when
    the scheduler made none)."""
    known = forecasts or {}
    labels = repo.jobs.job_labels(row.job_id for row in view)
    out = []
    for row in view:
        label = labels.get(row.job_id, _UNKNOWN)
        if owner is not None and label.owner != owner:
            continue
        if group is not None and (label.group or EVERYBODY) != group:
            continue
        if lab is not None and lab not in (row.labs if row.lab is None else (row.lab,)):
            continue
        if state is not None and row.state != state.value:
            continue
        if whiteboard is not None and not glob_match(whiteboard, label.whiteboard):
            continue
        if run is not None and label.run != run:
            continue
        forecast = known.get(row.set_id)
        shown = None if forecast is None else forecast_json(forecast)
        out.append({**asdict(row), **asdict(label), "forecast": shown})
    return out


def glob_match(pattern: str, text: str | None) -> bool:
    """A whiteboard glob as the store reads it: ``*`` and ``?``, case ignored."""
    escaped = pattern.replace("[", "[[]")  # only * and ? are special, as in SQL
    return text is not None and fnmatchcase(text.lower(), escaped.lower())
