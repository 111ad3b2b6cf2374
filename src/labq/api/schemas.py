"""Request bodies: strict (no coercion across types) and closed (unknown fields are errors)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

Name = Annotated[str, Field(min_length=1, max_length=255)]
Reason = Annotated[str, Field(min_length=1, max_length=2000)]
PriorityLabel = Literal["low", "medium", "normal", "high", "urgent"]
ConditionLabel = Literal["automated", "manual", "broken", "removed"]
Scalar = str | int | float | bool


class Body(BaseModel):
    """A JSON request body."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class NameBody(Body):
    """Something that needs only a name (a lab, a pool, a group)."""

    name: Name
