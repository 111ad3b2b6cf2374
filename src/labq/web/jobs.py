"""The jobs pages: the list with its filters and pages, one job, its live part, its logs.

A job's page shows every recipe set — retries marked and linked to the set they
retry — with recipes, tasks, results, log files and each recipe's state
history. The part that changes while the job runs is also served alone
(``/live``) for the page's live updates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Final

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import FileResponse, RedirectResponse

from labq.domain.priority import Priority
from labq.domain.states import RecipeState
from labq.gateway.deps import AppState, StateDep
from labq.gateway.schemas import RowId
from labq.store import HistoryEntry, JobView, RecipeSetView, RecipeView, reading
from labq.store.selection import JobQuery
from labq.usecases.forecasts import forecast_times, forecasts_of
from labq.usecases.logs import log_file, log_files
from labq.usecases.permissions import may_change_job
from labq.usecases.queries import find_jobs
from labq.web.aftermath import job_aftermath
from labq.web.rendering import PREFIX, fragment, page
from labq.web.route import PageRoute
from labq.web.session import Session, SessionDep

router = APIRouter(route_class=PageRoute, include_in_schema=False)

PAGE_SIZE: Final = 25
NOTES: Final = {
    "cancelled": "The job's unfinished recipes were cancelled.",
    "nothing-to-cancel": "Nothing was left to cancel: the job had already finished.",
    "priority": "The priority of the sets that still wait was changed.",
    "no-waiting-sets": "No set of this job still waits, so no priority changed.",
    "submitted": "The job was submitted.",
    "cloned": "The job was submitted, a clone of the one it links back to.",
    "extended": "The max_time of the job's running sets was extended.",
}


@dataclass(frozen=True)
class RecipeBlock:
    """A recipe with its role, state history and log files."""

    recipe: RecipeView
    role: str | None
    history: list[HistoryEntry]
    logs: list[str]


@dataclass(frozen=True)
class SetBlock:
    """A recipe set (one attempt) and what the page says about it."""

    rset: RecipeSetView
    current: bool  # the latest attempt: no retry supersedes it
    retried_by: int | None  # the set that retries this one
    recipes: list[RecipeBlock]


@dataclass(frozen=True)
class JobPage:
    """Everything the job page shows."""

    job: JobView
    sets: list[SetBlock]
    finished: bool
    # the scheduler's forecast of each waiting or running set (forecast_json, with "times")
    forecasts: dict[int, dict[str, Any]] = field(default_factory=dict)

    @property
    def lowest_waiting_priority(self) -> str | None:
        """The lowest priority among the waiting sets (what the priority form starts at)."""
        waiting = [s.spec.priority for s in self.waiting_sets]
        return min(waiting).label if waiting else None

    @property
    def waiting_sets(self) -> list[RecipeSetView]:
        """Sets that have neither started nor ended: their priority may still change."""
        return [
            b.rset for b in self.sets if b.rset.started_at is None and b.rset.finished_at is None
        ]

    @property
    def running_timed_sets(self) -> list[RecipeSetView]:
        """Running sets with a max_time: what ``extend`` moves."""
        return [
            b.rset
            for b in self.sets
            if b.rset.started_at is not None
            and b.rset.finished_at is None
            and b.rset.spec.max_time is not None
        ]


def load_job_page(app: AppState, job_id: int) -> JobPage:
    """A job with each recipe's history and the log files archived so far."""
    with reading(app.engine) as repo:
        job = repo.jobs.load_job(job_id)
        history = {r.id: repo.moves.recipe_history(r.id) for s in job.sets for r in s.recipes}
    logs = {entry["recipe"]: entry["files"] for entry in log_files(job, app.settings.data_path())}
    current = {s.id for s in job.current_sets}
    retried_by = {s.retry_of: s.id for s in job.sets if s.retry_of is not None}
    sets = [
        SetBlock(
            rset=s,
            current=s.id in current,
            retried_by=retried_by.get(s.id),
            recipes=[
                RecipeBlock(r, s.spec.recipes[i].role, history[r.id], logs.get(r.id, []))
                for i, r in enumerate(s.recipes)
            ],
        )
        for s in job.sets
    ]
    return JobPage(job=job, sets=sets, finished=job.state.is_final, forecasts=_forecasts(app, job))


def _forecasts(app: AppState, job: JobView) -> dict[int, dict[str, Any]]:
    """The forecasts of the job's unfinished sets, with their times in words."""
    if job.state.is_final:
        return {}
    now = app.clock()
    found = forecasts_of(app.events.forecasts(), (s.id for s in job.current_sets))
    return {f["set_id"]: {**f, "times": forecast_times(f, now)} for f in found}


def priority_choices(session: Session, view: JobPage) -> list[str]:
    """The priorities this reader may set: any for admins, else no higher than now."""
    if not view.waiting_sets or not may_change_job(session.user, view.job):
        return []
    if session.user.admin:
        return [p.label for p in Priority]
    # The API refuses a change that raises any waiting set: offer no more than the lowest.
    lowest = min(s.spec.priority for s in view.waiting_sets)
    return [p.label for p in Priority if p <= lowest]


def job_page(
    request: Request,
    app: AppState,
    session: Session,
    job_id: int,
    *,
    status: int = 200,
    error: str | None = None,
    note: str | None = None,
) -> Response:
    """The job page, with a message when an action was refused or done."""
    view = load_job_page(app, job_id)
    may_change = may_change_job(session.user, view.job)
    return page(
        request,
        "job.html",
        status=status,
        title=f"Job {job_id}",
        nav="jobs",
        view=view,
        may_cancel=may_change and not view.finished,
        priorities=priority_choices(session, view),
        after=job_aftermath(app, session.user, view.job),
        error=error,
        note=note,
    )


@router.get("/jobs")
def jobs_list(
    request: Request,
    app: StateDep,
    session: SessionDep,
    owner: str | None = None,
    group: str | None = None,
    state: RecipeState | None = None,
    whiteboard: Annotated[str | None, Query(max_length=255)] = None,
    run: Annotated[str | None, Query(max_length=255)] = None,
    lab: Annotated[str | None, Query(max_length=255)] = None,
    page_no: Annotated[int, Query(alias="page", ge=1, le=100_000)] = 1,
) -> Response:
    """A page of jobs, newest first, filtered as ``labq job list`` filters them."""
    found = JobQuery(
        owner=owner or None,
        group=group or None,
        state=state,
        whiteboard=whiteboard or None,
        run=run or None,
        lab=lab or None,
    )
    return jobs_page(request, app, found, page_no)


def jobs_page(
    request: Request,
    app: AppState,
    found: JobQuery,
    page_no: int = 1,
    *,
    note: str | None = None,
    refused: list[str] | None = None,
    status: int = 200,
    error: str | None = None,
) -> Response:
    """The jobs list; after a bulk cancel, what it did and the jobs it refused."""
    with reading(app.engine) as repo:
        listed = find_jobs(
            repo,
            found,
            limit=PAGE_SIZE,
            offset=(page_no - 1) * PAGE_SIZE,
            now=app.clock(),
            queue=app.events.queue_view,
            forecasts=app.events.forecasts,
        )
        users = [u.name for u in repo.people.list_users()]
        groups = repo.people.list_groups()
    total = listed.total
    return page(
        request,
        "jobs.html",
        status=status,
        title="Jobs",
        nav="jobs",
        jobs=listed.jobs,
        rows=listed.rows,
        total=total,
        page_no=page_no,
        pages=max(1, -(-total // PAGE_SIZE)),
        owner=found.owner or "",
        group=found.group or "",
        state=found.state.value if found.state else "",
        whiteboard=found.whiteboard or "",
        run=found.run or "",
        lab=found.lab or "",
        filtered=not found.empty(),
        users=users,
        groups=groups,
        states=[s.value for s in RecipeState],
        note=note,
        refused=refused or [],
        error=error,
    )


@router.get("/jobs/{job_id}")
def show_job(
    request: Request, job_id: RowId, app: StateDep, session: SessionDep, note: str | None = None
) -> Response:
    """One job: sets and attempts, recipes, tasks, results, logs, history."""
    return job_page(request, app, session, job_id, note=NOTES.get(note or ""))


@router.get("/jobs/{job_id}/live")
def job_live(job_id: RowId, app: StateDep, session: SessionDep) -> Response:
    """The changing part of the job page alone, for its live updates."""
    return fragment("job_live.html", view=load_job_page(app, job_id))


@router.get("/jobs/{job_id}/logs/file")
def job_log(
    job_id: RowId, app: StateDep, session: SessionDep, path: Annotated[str, Query(min_length=1)]
) -> Response:
    """One of the job's log files as plain text, checked exactly as the API checks it."""
    with reading(app.engine) as repo:
        wanted = log_file(repo, job_id, app.settings.data_path(), path)
    answer = FileResponse(wanted, media_type="text/plain; charset=utf-8")
    answer.headers["X-Content-Type-Options"] = "nosniff"
    answer.headers["Cache-Control"] = "no-store"
    return answer


@router.get("/recipes/{recipe_id}")
def recipe_link(recipe_id: RowId, app: StateDep, session: SessionDep) -> Response:
    """A recipe's place on its job's page."""
    with reading(app.engine) as repo:
        set_id = repo.jobs.get_recipe(recipe_id).recipe_set_id
        job_id = repo.jobs.get_recipe_set(set_id).job_id
    return RedirectResponse(f"{PREFIX}/jobs/{job_id}#recipe-{recipe_id}", status_code=303)
