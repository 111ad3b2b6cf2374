"""``/queue``: queued recipe sets in scheduling order, as the scheduler reports them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from labq.api.deps import StateDep, UserDep
from labq.api.rows import Glob, Text, queue_rows
from labq.domain.states import RecipeState
from labq.store import reading

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
    job's owner, group, whiteboard and run; what it waits for in plain words (``reason``)."""
    view = app.events.queue_view()
    with reading(app.engine) as repo:
        labels = repo.jobs.job_labels(row.job_id for row in view)
    rows = queue_rows(
        view, labels, owner=owner, group=group, lab=lab, state=state, whiteboard=whiteboard, run=run
    )
    return {"queue": rows}
