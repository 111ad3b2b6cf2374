"""What every table shares: the declarative base, naming rules, enum texts, column helpers.

Enum columns hold the enum's ``.value`` and carry a CHECK constraint; further
CHECKs forbid combinations the lifecycle can never produce. The migration in
``migrations/versions`` builds exactly this schema (a test compares them).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from sqlalchemy import (
    JSON,
    ForeignKey,
    Integer,
    MetaData,
    String,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, MappedColumn, mapped_column

from labq.domain.priority import Priority
from labq.domain.states import (
    FINAL_RECIPE_STATES,
    SYSTEM_HOLDING_STATES,
    RecipeState,
    Usage,
)
from labq.store.columns import UTCDateTime, sql_list, values_of

NAMING: Final = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
PRIORITIES: Final = tuple(p.label for p in Priority)
TASK_STATUSES: Final = ("new", "running", "completed", "cancelled", "aborted")
FINAL_TASK_STATUSES: Final = ("completed", "cancelled", "aborted")
FREE_USAGES: Final = values_of((Usage.IDLE, Usage.PENDING))


HOLDING = sql_list(values_of(s for s in RecipeState if s in SYSTEM_HOLDING_STATES))
FINAL = sql_list(values_of(s for s in RecipeState if s in FINAL_RECIPE_STATES))
UNPLACED = sql_list(values_of((RecipeState.NEW, RecipeState.QUEUED, RecipeState.ASSIGNED)))
FREE = sql_list(FREE_USAGES)
TASK_FINAL = sql_list(FINAL_TASK_STATUSES)
# Partial indexes work on SQLite and PostgreSQL alike.
OPEN = text("finished_at IS NULL")

Name = String(255)
EnumText = String(16)


class Base(DeclarativeBase):
    """Declarative base with constraint names Alembic can rely on."""

    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {  # noqa: RUF012 - SQLAlchemy's class-level configuration
        dict[str, Any]: JSON,
        list[Any]: JSON,
        datetime: UTCDateTime,
    }


def id_column() -> Mapped[int]:
    return mapped_column(Integer, primary_key=True)


def foreign_key(target: str, *, cascade: bool = False, **kw: Any) -> MappedColumn[Any]:
    return mapped_column(ForeignKey(target, ondelete="CASCADE" if cascade else None), **kw)
