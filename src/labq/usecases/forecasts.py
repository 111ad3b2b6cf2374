"""Forecasts as people read them: when a set should start and end, and what that rests on.

The scheduler forecasts (``SchedulerPort.forecasts()``); the API, the pages and the
command line show the same fields and the same words, made here. Times are UTC, to the
second; lengths are in the two largest units that matter ("1 h 25 min").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from labq.domain.queue import SetForecast

BASES: Final = {
    "source": "of this job",
    "work": "of the same tasks on the same kind of systems",
    "owner_work": "of the same tasks by its owner",
    "owner": "of its owner's jobs",
    "group": "of its group's jobs",
}


def forecast_json(forecast: SetForecast) -> dict[str, Any]:
    """One set's forecast: start and end (UTC, to the second; None when it cannot be
    said), the prediction with its basis, and the same in plain words."""
    return {
        "set_id": forecast.set_id,
        "running": forecast.running,
        "start_at": moment(forecast.start),
        "end_at": moment(forecast.end),
        "prediction": {
            "seconds": round(forecast.seconds),
            "spread": round(forecast.spread),
            "runs": forecast.runs,
            "median": None if forecast.median is None else round(forecast.median),
            "basis": forecast.basis,
        },
        "basis_text": basis_text(forecast),
    }


def forecasts_of(
    forecasts: Mapping[int, SetForecast], set_ids: Iterable[int]
) -> list[dict[str, Any]]:
    """The forecasts of these sets that the scheduler made, in their order."""
    return [forecast_json(forecasts[i]) for i in set_ids if i in forecasts]


def moment(epoch: float | None) -> datetime | None:
    """An epoch second as a UTC time to the second."""
    return None if epoch is None else datetime.fromtimestamp(round(epoch), UTC)


def basis_text(forecast: SetForecast) -> str:
    """``23 earlier runs of this job, median 1 h 25 min``, or ``no earlier runs; from
    max_time 2 h``."""
    if forecast.runs and forecast.median is not None:
        runs = f"{forecast.runs} earlier run{'s' if forecast.runs != 1 else ''}"
        of = BASES.get(forecast.basis, f"({forecast.basis})")
        return f"{runs} {of}, median {human(forecast.median)}"
    if forecast.basis == "max_time":
        return f"no earlier runs; from max_time {human(forecast.seconds)}"
    return "no earlier runs and no max_time: no prediction"


def forecast_line(forecast: dict[str, Any], now: datetime) -> str:
    """``starts ~14:05 UTC, ends ~15:30 UTC; 23 earlier runs …`` from :func:`forecast_json`
    (its times as datetimes or ISO strings); a day other than ``now``'s is named."""
    return f"{forecast_times(forecast, now)}; {forecast['basis_text']}"


def forecast_times(forecast: dict[str, Any], now: datetime) -> str:
    """``starts ~14:05 UTC, ends ~15:30 UTC``, ``running, ends ~15:30 UTC`` or ``start
    unknown`` (the scheduler cannot say: it waits for a dependency, a filter, …)."""
    start, end = _parsed(forecast["start_at"]), _parsed(forecast["end_at"])
    if forecast["running"]:
        return "running" if end is None else f"running, ends ~{_clock(end, now)}"
    if start is None:
        return "start unknown"
    head = f"starts ~{_clock(start, now)}"
    return head if end is None else f"{head}, ends ~{_clock(end, now)}"


def human(seconds: float) -> str:
    """A length in its two largest units: ``45 s``, ``3 min 5 s``, ``1 h 25 min``, ``2 d 3 h``."""
    left = max(0, round(seconds))
    days, left = divmod(left, 86400)
    hours, left = divmod(left, 3600)
    minutes, secs = divmod(left, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "min"), (secs, "s")]
    return " ".join([f"{n} {unit}" for n, unit in parts if n][:2]) or "0 s"


def _parsed(value: datetime | str | None) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _clock(at: datetime, now: datetime) -> str:
    at = at.astimezone(UTC)
    if at.date() == now.astimezone(UTC).date():
        return at.strftime("%H:%M UTC")
    return at.strftime("%b %d %H:%M UTC").replace(" 0", " ", 1)
