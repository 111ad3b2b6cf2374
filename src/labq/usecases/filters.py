"""Eligibility controls (admins): queue filter rules, and pausing a lab's queue.

A change posts :class:`FiltersChanged` or :class:`PauseChanged`: the scheduler judges
the sets that have not started yet again once it has committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from labq.domain import filters
from labq.domain.events import EventSink, FiltersChanged, PauseChanged
from labq.domain.model import User
from labq.errors import RequestError
from labq.store import Repository
from labq.store.filters import FilterView
from labq.store.pauses import PauseView
from labq.usecases.permissions import require_admin


def parse_rule(
    action: str, rate: int | None, priority: int, predicates: Sequence[str]
) -> list[filters.Predicate]:
    """A rule's predicates parsed (``FIELD OP VALUE``), and the rule checked whole;
    refused naming the predicate or ``rate`` at fault."""
    parsed = []
    for index, text in enumerate(predicates):
        try:
            parsed.append(filters.parse_predicate(text))
        except filters.FilterError as exc:
            place = f"predicates[{index}]"
            raise RequestError(f"{place}: {exc}", place=place) from None
    try:
        filters.check_rule(action, rate, priority)
    except filters.FilterError as exc:
        raise RequestError(f"rate: {exc}", place="rate") from None
    return parsed


def add_filter(
    repo: Repository,
    caller: User,
    *,
    action: str,
    rate: int | None,
    priority: int,
    predicates: Sequence[str],
    comment: str | None,
    now: datetime,
    sink: EventSink,
) -> FilterView:
    """Add a rule (admins); sets not started yet are judged again, and a reject cancels."""
    require_admin(caller)
    parsed = parse_rule(action, rate, priority, predicates)
    rule = repo.filters.add_filter(
        action=action,
        rate=rate,
        priority=priority,
        predicates=parsed,
        comment=comment,
        actor=caller.name,
        now=now,
    )
    sink.post(FiltersChanged())
    return next(f for f in repo.filters.list_filters() if f.rule.id == rule.id)


def delete_filter(
    repo: Repository, caller: User, filter_id: int, *, now: datetime, sink: EventSink
) -> None:
    """Remove a rule (admins); the sets it held are judged again."""
    require_admin(caller)
    repo.filters.delete_filter(filter_id, actor=caller.name, now=now)
    sink.post(FiltersChanged())


def pause_until(until: str | None, for_s: float | None, now: datetime) -> datetime | None:
    """When a pause ends: at ``until`` (ISO 8601 with a zone, in the future), ``for_s``
    seconds from now, or never (None: until resumed); not both."""
    if until is not None and for_s is not None:
        raise RequestError("give 'until' or 'for_s', not both", place="for_s")
    if for_s is not None:
        return now + timedelta(seconds=for_s)
    if until is None:
        return None
    try:
        moment = datetime.fromisoformat(until)
    except ValueError:
        raise RequestError(f"until: {until!r} is not an ISO 8601 time", place="until") from None
    if moment.tzinfo is None:
        raise RequestError(
            f"until: {until!r} needs a time zone (e.g. 'Z' or '+02:00')", place="until"
        )
    if moment <= now:
        raise RequestError(f"until: {until!r} is not in the future", place="until")
    return moment


def pause_queue(
    repo: Repository,
    caller: User,
    lab: str,
    *,
    until: datetime | None,
    reason: str | None,
    now: datetime,
    sink: EventSink,
) -> PauseView:
    """Pause a lab's queue (admins): nothing new starts or takes systems there; runs go on."""
    require_admin(caller)
    view = repo.pauses.pause_queue(lab, until=until, reason=reason, actor=caller.name, now=now)
    sink.post(PauseChanged(lab))
    return view


def resume_queue(
    repo: Repository, caller: User, lab: str, *, now: datetime, sink: EventSink
) -> bool:
    """Let a lab's queue move again (admins); whether it was paused."""
    require_admin(caller)
    resumed = repo.pauses.resume_queue(lab, actor=caller.name, now=now)
    if resumed:
        sink.post(PauseChanged(lab))
    return resumed
