"""Request bodies: strict (no coercion across types) and closed (unknown fields are errors).

Numbers that reach an integer column are bounded here, once, at the type: ids,
offsets and counters fit PostgreSQL's ``integer`` (SQLite's is wider), so a huge
value is a 422 naming the field, never a database error.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    WithJsonSchema,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

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


def _iso_8601(value: object) -> object:
    """A time is an ISO 8601 string, as the document says (a number is no Unix time here)."""
    if isinstance(value, int | float) or (isinstance(value, str) and _is_number(value)):
        raise ValueError("must be an ISO 8601 date and time, not a number")
    return value


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class _NoNul:
    """Refuse NUL in a string, and say so in its JSON schema (so schema and validation agree)."""

    def __get_pydantic_core_schema__(
        self, source: type[Any], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(_no_nul, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        found = handler(schema)
        found["pattern"] = NUL_FREE
        return found


NUL_FREE: Final = r"^[^\u0000]*$"  # the JSON Schema pattern of a string without NUL
INTEGRAL: Final = BeforeValidator(_integral)
NO_NUL: Final = _NoNul()
IsoTime = Annotated[datetime, BeforeValidator(_iso_8601)]

RowId = Annotated[int, Field(ge=1, le=INT4_MAX), INTEGRAL]
Offset = Annotated[int, Field(ge=0, le=INT4_MAX), INTEGRAL]
Name = Annotated[str, Field(min_length=1, max_length=255), NO_NUL]
Reason = Annotated[str, Field(min_length=1, max_length=2000), NO_NUL]
PriorityLabel = Literal["low", "medium", "normal", "high", "urgent"]
ConditionLabel = Literal["automated", "manual", "broken", "removed"]
Scalar = Annotated[str, NO_NUL] | int | float | bool
# Pydantic would turn a key's pattern into patternProperties, which leaves other keys free.
ATTRIBUTES_SCHEMA: Final = {
    "type": "object",
    "propertyNames": {"minLength": 1, "maxLength": 255, "pattern": NUL_FREE},
    "additionalProperties": {
        "anyOf": [
            {"type": "string", "pattern": NUL_FREE},
            {"type": "integer"},
            {"type": "number"},
            {"type": "boolean"},
        ]
    },
}
Attributes = Annotated[dict[Name, Scalar], WithJsonSchema(ATTRIBUTES_SCHEMA)]


class Body(BaseModel):
    """A JSON request body."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class NameBody(Body):
    """Something that needs only a name (a lab, a pool, a group)."""

    name: Name
