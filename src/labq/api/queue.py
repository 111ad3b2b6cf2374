"""``/queue``: queued recipe sets in scheduling order, as the scheduler reports them."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter

from labq.api.deps import StateDep, UserDep

router = APIRouter(prefix="/queue", tags=["queue"])


@router.get("")
def queue(app: StateDep, _: UserDep) -> dict[str, Any]:
    """Each row: set, job, position, effective and nominal priority, age, hold, lab."""
    return {"queue": [asdict(row) for row in app.events.queue_view()]}
