"""The scheduler's forecasts as people see them: when each waiting set should start and end,
when each running one should end, and the prediction they rest on.

Two steps, so the scheduler's lock is held only for the first: :func:`planned` asks the
core (``Scheduler.forecasts``: from the free-time profile and the reservations it keeps,
no new look at the systems), and :func:`explained` adds each set's kept prediction from
the store. A waiting set's own end is its start plus its predicted run time, so what is shown
agrees with the
prediction beside it (also when the core plans on ``max_time``); the starts are the
core's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from labq.domain.queue import SetForecast
from labq.scheduler.view import SchedulerView
from labq.service import predicting
from labq.store import Repository, epoch


@dataclass(frozen=True)
class Planned:
    """One set's forecast as the core made it, with what :func:`explained` needs of it."""

    set_id: int
    start: float | None  # None: the core cannot foresee it
    end: float | None
    started_at: float | None
    max_time: float | None
    predicted: float | None


def planned(core: SchedulerView, now: datetime) -> list[Planned]:
    """The core's forecasts at ``now`` (under the scheduler's lock)."""
    at = max(epoch(now), core.now)
    out = []
    for set_id, found in core.forecasts(at).items():
        entry = core.sets[set_id]
        out.append(
            Planned(
                set_id,
                None if math.isinf(found.start) else found.start,
                None if math.isinf(found.end) else found.end,
                entry.started_at,
                entry.max_time,
                entry.predicted,
            )
        )
    return out


def explained(repo: Repository, plans: Sequence[Planned], now: datetime) -> dict[int, SetForecast]:
    """Each planned set's forecast with the prediction kept with it, by set id."""
    kept = repo.history.predictions_of(p.set_id for p in plans)
    out = {}
    for plan in plans:
        prediction = kept.get(plan.set_id, predicting.NOTHING)
        seconds = predicting.seconds(prediction)
        if seconds is None:
            seconds = plan.predicted
        out[plan.set_id] = SetForecast(
            set_id=plan.set_id,
            start=plan.start,
            end=_end(plan, seconds),
            seconds=seconds if seconds is not None else 0.0,
            spread=float(prediction.get("spread") or 0.0),
            runs=int(prediction.get("runs") or 0),
            median=prediction.get("median"),
            basis=str(prediction.get("basis") or "none"),
            running=plan.started_at is not None,
        )
    return out


def forecasts(repo: Repository, core: SchedulerView, now: datetime) -> dict[int, SetForecast]:
    """Both steps at once (a reader's rebuilt core, which no other thread shares)."""
    return explained(repo, planned(core, now), now)


def _end(plan: Planned, seconds: float | None) -> float | None:
    """A waiting set's start plus its predicted run time; a running set's end is the core's
    (its plan, raised as EASY++ raises it once it runs past it); the core's end too for a
    set without a prediction."""
    if plan.start is None or seconds is None or plan.started_at is not None:
        return plan.end
    return plan.start + seconds
