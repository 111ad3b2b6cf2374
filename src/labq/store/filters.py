"""Filter rules: stored in priority order, judged by :mod:`labq.domain.filters`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select

from labq.domain import filters
from labq.errors import InputError, NotFoundError
from labq.store.base import Db
from labq.store.tables import Filters, Users


@dataclass(frozen=True)
class FilterView:
    """A stored filter rule, with who made it and when."""

    rule: filters.Rule
    created_by: str | None
    created_at: datetime


class FilterStore:
    """The admission filter rules: added, listed, deleted."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def add_filter(
        self,
        *,
        action: str,
        actor: str,
        now: datetime,
        priority: int = 0,
        rate: int | None = None,
        predicates: Sequence[filters.Predicate] = (),
        comment: str | None = None,
    ) -> filters.Rule:
        """Store a filter rule; raise InputError when action, rate and priority do not agree."""
        try:
            filters.check_rule(action, rate, priority)
        except filters.FilterError as exc:
            raise InputError(str(exc), place="rate" if "rate" in str(exc) else "action") from None
        with self.db.atomic():
            filter_id = self.conn.execute(
                insert(Filters)
                .values(
                    priority=priority,
                    action=action,
                    rate=rate,
                    predicates=[p.to_native() for p in predicates],
                    comment=comment,
                    created_by=self.db.user_id(actor),
                    created_at=now,
                )
                .returning(Filters.id)
            ).scalar_one()
            rule = filters.Rule(filter_id, priority, action, tuple(predicates), rate, comment)
            self.db.log(now, actor, "filter", "add", object_id=filter_id, new=_summary(rule))
        return rule

    def list_filters(self) -> list[FilterView]:
        """Every filter rule, in the order they are tried."""
        rows = self.conn.execute(
            select(Filters, Users.name.label("creator"))
            .outerjoin(Users, Users.id == Filters.created_by)
            .order_by(Filters.priority, Filters.id)
        )
        return [FilterView(_rule(row), row.creator, row.created_at) for row in rows]

    def filter_rules(self) -> list[filters.Rule]:
        """Every filter rule, in the order they are tried."""
        rows = self.conn.execute(select(Filters).order_by(Filters.priority, Filters.id))
        return [_rule(row) for row in rows]

    def delete_filter(self, filter_id: int, *, actor: str, now: datetime) -> filters.Rule:
        """Remove a filter rule; returns it (NotFoundError when there is none)."""
        with self.db.atomic():
            row = self.conn.execute(select(Filters).where(Filters.id == filter_id)).one_or_none()
            if row is None:
                raise NotFoundError(f"no filter {filter_id}")
            rule = _rule(row)
            self.conn.execute(delete(Filters).where(Filters.id == filter_id))
            self.db.log(now, actor, "filter", "delete", object_id=filter_id, old=_summary(rule))
        return rule

    # --- paused lab queues -------------------------------------------------------------


def _rule(row: Any) -> filters.Rule:
    predicates = tuple(
        filters.make_predicate(p["field"], p["op"], p["value"]) for p in row.predicates
    )
    return filters.Rule(row.id, row.priority, row.action, predicates, row.rate, row.comment)


def _summary(rule: filters.Rule) -> str:
    action = f"rate-limit {rule.rate}" if rule.action == "rate-limit" else rule.action
    where = " ".join(str(p) for p in rule.predicates) or "every job"
    return f"{action} if {where} (priority {rule.priority})"
