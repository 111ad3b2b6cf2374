"""The interval a chart or a utilisation figure covers, as the reader chose it.

A form gives either a recent span (``last=6h``) or a ``start`` and an ``end``
(``2026-01-31 14:00``, read as UTC, as every time on the pages is). A bad value
is not an error page: the default interval is shown with a message saying why.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

SPANS: Final = {
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(days=1),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}
DEFAULT_SPAN: Final = "6h"
LONGEST: Final = timedelta(days=366)
FORM_FORMAT: Final = "%Y-%m-%d %H:%M"  # what the form fields show: UTC, 24-hour


@dataclass(frozen=True)
class Interval:
    """``[start, end)`` in UTC, and the span it was chosen by (None: by start and end)."""

    start: datetime
    end: datetime
    span: str | None

    @property
    def start_field(self) -> str:
        """The start as the form shows it (UTC, 24-hour)."""
        return self.start.strftime(FORM_FORMAT)

    @property
    def end_field(self) -> str:
        """The end as the form shows it (UTC, 24-hour)."""
        return self.end.strftime(FORM_FORMAT)


def recent(now: datetime, span: str = DEFAULT_SPAN) -> Interval:
    """The last ``span`` up to ``now``."""
    return Interval(now - SPANS[span], now, span)


def chosen_interval(
    now: datetime, *, last: str | None, start: str | None, end: str | None
) -> tuple[Interval, str | None]:
    """The interval the form asks for, or the default one and what was wrong."""
    if start or end:
        try:
            begin, finish = _moment(start, "start"), _moment(end, "end")
        except ValueError as exc:
            return recent(now), str(exc)
        if finish <= begin:
            return recent(now), "the end must come after the start"
        if finish - begin > LONGEST:
            return recent(now), f"an interval is at most {LONGEST.days} days long"
        return Interval(begin, finish, None), None
    if last is None or last == "":
        return recent(now), None
    if last not in SPANS:
        return recent(now), f"unknown span {last!r} (expected one of {', '.join(SPANS)})"
    return recent(now, last), None


def _moment(text: str | None, name: str) -> datetime:
    if not text:
        raise ValueError(f"give both a start and an end (the {name} is missing)")
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"the {name} {text!r} is not a UTC date and time like 2026-01-31 14:00"
        ) from None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
