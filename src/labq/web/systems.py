"""The systems pages: the list (condition, usage, current recipe, pools, lab) and one system.

A system's page shows its usage history as a timeline and as a table, its
utilisation over the interval the reader chose, the recipes it ran lately and
the aborts among them, and who changed its condition and why.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Final

from fastapi import APIRouter, Request, Response
from markupsafe import Markup

from labq.domain.states import RecipeState
from labq.domain.usage import UsageRecord
from labq.gateway.deps import AppState, StateDep
from labq.store import ActivityEntry, RecipeView, Repository, epoch, reading
from labq.store.reservations import describe
from labq.web.charts import gantt_chart
from labq.web.intervals import SPANS, Interval, chosen_interval, recent
from labq.web.rendering import page
from labq.web.route import PageRoute
from labq.web.series import system_timeline
from labq.web.session import Session, SessionDep

router = APIRouter(route_class=PageRoute, include_in_schema=False)

RECENT_RECIPES: Final = 15
HISTORY_ROWS: Final = 30
ACTIVITY_SCAN: Final = 500  # activity entries looked through for this system's changes
NOTES: Final = {
    "reserved": "A reservation job was queued: the system is yours once it runs.",
    "loaned": "The system was loaned.",
    "released": "The reservation or loan was ended.",
    "removed": "The system was removed from service.",
    "already-removed": "The system had already been removed.",
}


@dataclass(frozen=True)
class RecipeOnSystem:
    """A recipe that held the system, and the job and attempt it belongs to."""

    recipe: RecipeView
    job_id: int
    attempt: int


@router.get("/systems")
def systems_list(
    request: Request,
    app: StateDep,
    session: SessionDep,
    lab: str | None = None,
    pool: str | None = None,
) -> Response:
    """Every system (of one lab or pool), with counts by condition and usage."""
    with reading(app.engine) as repo:
        systems = repo.systems.list_systems(lab=lab or None, pool=pool or None)
        labs = repo.systems.list_labs()
        pools = repo.access.list_pools()
        held = {f: describe(r) for f, r in repo.reservations.open_reservations().items()}
    return page(
        request,
        "systems.html",
        title="Systems",
        nav="systems",
        systems=systems,
        labs=labs,
        pools=pools,
        lab=lab or "",
        pool=pool or "",
        conditions=Counter(s.condition.value for s in systems),
        usages=Counter(s.usage.value for s in systems),
        held=held,  # fqdn -> "reserved by alice until …" (issue 14)
    )


@router.get("/systems/{fqdn}")
def show_system(
    request: Request,
    fqdn: str,
    app: StateDep,
    session: SessionDep,
    last: str | None = None,
    start: str | None = None,
    end: str | None = None,
    note: str | None = None,
) -> Response:
    """One system: facts, timeline, utilisation, recent recipes, aborts and changes."""
    interval, problem = chosen_interval(app.clock(), last=last, start=start, end=end)
    return system_page(
        request, app, session, fqdn, interval=interval, error=problem, note=NOTES.get(note or "")
    )


def system_page(
    request: Request,
    app: AppState,
    session: Session,
    fqdn: str,
    *,
    interval: Interval | None = None,
    status: int = 200,
    error: str | None = None,
    note: str | None = None,
) -> Response:
    """The system's page, with a message when an action was refused or done."""
    now = app.clock()
    if interval is None:
        interval = recent(now)
    with reading(app.engine) as repo:
        system = repo.systems.get_system(fqdn)
        reason = repo.systems.condition_reason(fqdn)
        aborts_in_a_row = repo.systems.consecutive_aborts(fqdn)
        history = repo.systems.usage_history(fqdn)
        share = repo.systems.utilisation(start=interval.start, end=interval.end, fqdn=fqdn, now=now)
        recipes = recent_recipes(repo, history)
        changes = condition_changes(repo, fqdn)
        reservation = repo.reservations.reservation_of(fqdn)
    rows = system_timeline(app.engine, start=interval.start, end=interval.end, fqdns=[fqdn])
    timeline = gantt_chart(
        rows, start=epoch(interval.start), end=epoch(interval.end), title=f"{fqdn}: usage"
    )
    return page(
        request,
        "system.html",
        title=fqdn,
        nav="systems",
        system=system,
        held=None if reservation is None else describe(reservation),
        holder=None if reservation is None else reservation.holder,
        reason=reason,
        aborts_in_a_row=aborts_in_a_row,
        history=list(reversed(history))[:HISTORY_ROWS],
        history_total=len(history),
        now=epoch(now),
        interval=interval,
        spans=list(SPANS),
        status=status,
        error=error,
        note=note,
        share=share,
        timeline=Markup(timeline),  # noqa: S704 - SVG made by labq.web.charts, escaped there
        recipes=recipes,
        aborts=[r for r in recipes if r.recipe.state is RecipeState.ABORTED],
        changes=changes,
    )


def recent_recipes(repo: Repository, history: list[UsageRecord]) -> list[RecipeOnSystem]:
    """The recipes that held the system lately, newest first."""
    ids: list[int] = []
    for row in reversed(history):
        if row.recipe is not None and row.recipe not in ids:
            ids.append(row.recipe)
            if len(ids) == RECENT_RECIPES:
                break
    out = []
    for recipe_id in ids:
        recipe = repo.jobs.get_recipe(recipe_id)
        rset = repo.jobs.get_recipe_set(recipe.recipe_set_id)
        out.append(RecipeOnSystem(recipe, rset.job_id, rset.attempt))
    return out


def condition_changes(repo: Repository, fqdn: str) -> list[ActivityEntry]:
    """Who changed the system's condition lately, and why (newest first)."""
    entries = repo.log.activity(kind="system", limit=ACTIVITY_SCAN)
    return [e for e in entries if e.object_name == fqdn]
