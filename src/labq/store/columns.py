"""Column types and constraint helpers shared by the table definitions."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Literal

from sqlalchemy import CheckConstraint, DateTime, Dialect, TypeDecorator


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on every dialect.

    PostgreSQL keeps ``timestamptz``; SQLite has no time zones, so the value is
    stored as naive UTC text (which sorts and compares correctly) and read back
    as aware UTC. Naive datetimes are refused: their meaning depends on the host.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: pass an aware (UTC) one")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def render_item(type_: str, obj: object, _context: object) -> str | Literal[False]:
    """Alembic autogenerate hook: write :class:`UTCDateTime` as ``sa.DateTime(timezone=True)``.

    New migrations then import nothing from labq, which may change after them.
    """
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def epoch(moment: datetime) -> float:
    """Seconds since the epoch: the clock of the domain's usage rows."""
    return moment.timestamp()


def from_epoch(seconds: float) -> datetime:
    """The aware UTC datetime of an epoch time."""
    return datetime.fromtimestamp(seconds, UTC)


def values_of(members: Iterable[enum.Enum]) -> tuple[str, ...]:
    """The stored strings of some enum members, in declaration order."""
    return tuple(str(m.value) for m in members)


def one_of(column: str, allowed: Iterable[str], *, name: str | None = None) -> CheckConstraint:
    """``CHECK (column IN (...))``, named after the column unless told otherwise."""
    return CheckConstraint(f"{column} IN {sql_list(allowed)}", name=name or column)


def sql_list(values: Iterable[str]) -> str:
    """``('a', 'b')`` for a CHECK constraint; only for our own enum values, never input."""
    quoted = []
    for value in values:
        if "'" in value:
            raise ValueError(f"enum value {value!r} cannot be quoted safely")
        quoted.append(f"'{value}'")
    return "(" + ", ".join(quoted) + ")"
