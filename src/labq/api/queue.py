"""``/queue``: queued recipe sets in scheduling order, as the scheduler reports them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from labq.api.rows import Glob, Text
from labq.domain.states import RecipeState
from labq.gateway.deps import StateDep, UserDep
from labq.store import reading
from labq.usecases.queries import queue_rows

router = APIRouter(prefix="/queue", tags=["queue"])


@router.get("")
def queue(
    app: StateDep,
    _: UserDep,
    owner: Text = None,
    group: Text = None,
    lab: Text = None,
    state: RecipeState | None = None,
    whiteboard: Glob = None,
    run: Text = None,
) -> dict[str, Any]:
    """Each row: set, job, position, effective and nominal priority, age, hold, lab; the
    job's owner, group, whiteboard and run; what it waits for in plain words (``reason``);
    its ``forecast``: ``start_at`` and ``end_at`` (UTC, to the second; null when the
    scheduler cannot say), the ``prediction`` of its run time (``seconds``, ``spread``, the
    earlier ``runs`` it learned from, their ``median``, and its ``basis``: ``source``,
    ``work``, ``owner``, ``group``, ``max_time`` or ``default``) and ``basis_text``, the
    same in words. ``forecast`` is null on a server that does not schedule and cannot
    rebuild a forecast."""
    view = app.events.queue_view()
    forecasts = app.events.forecasts()
    with reading(app.engine) as repo:
        rows = queue_rows(
            repo,
            view,
            owner=owner,
            group=group,
            lab=lab,
            state=state,
            whiteboard=whiteboard,
            run=run,
            forecasts=forecasts,
        )
    return {"queue": rows}
