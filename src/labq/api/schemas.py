"""Request bodies: strict (no coercion across types) and closed (unknown fields are errors).

Numbers that reach an integer column are bounded here, once, at the type: ids,
offsets and counters fit PostgreSQL's ``integer`` (SQLite's is wider), so a huge
value is a 422 naming the field, never a database error.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

INT4_MAX: Final = 2**31 - 1  # the largest id or counter an ``integer`` column holds


def _integral(value: object) -> object:
    """``1.0`` is an integer to JSON Schema, so to us too (``1.5`` stays refused)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _no_nul(value: str) -> str:
    """PostgreSQL text cannot hold NUL: refuse it here, naming the field."""
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    return value


INTEGRAL: Final = BeforeValidator(_integral)
NO_NUL: Final = AfterValidator(_no_nul)

RowId = Annotated[int, Field(ge=1, le=INT4_MAX), INTEGRAL]
Offset = Annotated[int, Field(ge=0, le=INT4_MAX), INTEGRAL]
Name = Annotated[str, Field(min_length=1, max_length=255), NO_NUL]
Reason = Annotated[str, Field(min_length=1, max_length=2000), NO_NUL]
PriorityLabel = Literal["low", "medium", "normal", "high", "urgent"]
ConditionLabel = Literal["automated", "manual", "broken", "removed"]
Scalar = Annotated[str, NO_NUL] | int | float | bool


class Body(BaseModel):
    """A JSON request body."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class NameBody(Body):
    """Something that needs only a name (a lab, a pool, a group)."""

    name: Name
