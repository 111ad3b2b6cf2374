"""Host requirements: a boolean expression over system properties.

The native form is a mapping ``property -> value`` or ``property -> {op: value}``
whose entries must all hold, with ``and``/``or`` (lists of such mappings) and
``not`` (one mapping) to combine them. A list value means "one of these".

Properties: ``fqdn``, ``lab``, ``arch``, ``owner``, ``pool`` and ``cpu_flag`` (a
system has many: ``=`` asks for membership), any attribute (``memory_mb``, ``cpus``,
``machine_type``, ``model``, ...) and the inventory's ``disk_count``, ``disk_space``
and ``last_inventoried``. A system without the property satisfies only ``!=``; an
empty value is no value (``hypervisor: ""`` asks for a system that records none).
Values compare as numbers when both sides are numbers, by day when the wanted value
is a ``YYYY-MM-DD`` date and the system's an ISO date or date-time, else as text;
``like`` is SQL ``LIKE`` (``%`` any run, ``_`` one character), case-insensitive.

``device`` and ``disk`` (``COLLECTIONS``) take a mapping that one item of the
system's inventory must satisfy as a whole: ``{"device": {"driver": "e1000e",
"vendor_id": "8086"}}`` wants one device with both, not two devices with one each.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, TypeVar, Union

Scalar = str | int | float | bool
Item = Mapping[str, Scalar]  # one device or disk of a system's inventory
_T = TypeVar("_T", float, str)

OPERATORS: Final = ("=", "!=", "<", "<=", ">", ">=", "like")
SET_PROPERTIES: Final = frozenset({"pool", "cpu_flag"})
COLLECTIONS: Final = frozenset({"device", "disk"})
_SET_OPERATORS: Final = frozenset({"=", "!=", "like"})
_COMBINERS: Final = frozenset({"and", "or", "not"})
_PROPERTY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:/-]*$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATED = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[T ].*)?$")


@dataclass(frozen=True)
class Compare:
    """``property op value``."""

    prop: str
    op: str
    value: Scalar


@dataclass(frozen=True)
class AllOf:
    """Every term holds; the empty conjunction matches every system."""

    terms: tuple[Requirement, ...]


@dataclass(frozen=True)
class AnyOf:
    """At least one term holds; the empty disjunction matches nothing."""

    terms: tuple[Requirement, ...]


@dataclass(frozen=True)
class Negation:
    """The term does not hold."""

    term: Requirement


@dataclass(frozen=True)
class Some:
    """At least one item of a collection (``device``, ``disk``) satisfies the term."""

    collection: str
    term: Requirement


Requirement = Union[Compare, AllOf, AnyOf, Negation, Some]  # noqa: UP007 - recursive alias
ANY_SYSTEM: Final[Requirement] = AllOf(())

Fact = Scalar | frozenset[str] | tuple[Item, ...]
Facts = Mapping[str, Fact]


class RequirementError(ValueError):
    """A requirement that cannot be read; ``path`` says where inside it."""

    def __init__(self, path: str, problem: str):
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}" if path else problem)


# --- reading the native form -------------------------------------------------


def parse(raw: object, path: str = "host") -> Requirement:
    """Read the native form into an expression, or raise RequirementError."""
    if raw is None:
        return ANY_SYSTEM
    if isinstance(raw, Compare | AllOf | AnyOf | Negation | Some):
        return raw
    if not isinstance(raw, Mapping):
        raise RequirementError(path, f"expected a mapping of property to value, got {_kind(raw)}")
    terms: list[Requirement] = []
    for key, value in raw.items():
        if not isinstance(key, str):
            raise RequirementError(path, f"property names are text, got {key!r}")
        terms.extend(_parse_entry(key, value, f"{path}.{key}"))
    return terms[0] if len(terms) == 1 else AllOf(tuple(terms))


def _parse_entry(key: str, value: object, path: str) -> list[Requirement]:
    if key in ("and", "or"):
        if not isinstance(value, Sequence) or isinstance(value, str):
            raise RequirementError(path, f"'{key}' takes a list of mappings, got {_kind(value)}")
        parts = tuple(parse(item, f"{path}[{i}]") for i, item in enumerate(value))
        return [AllOf(parts) if key == "and" else AnyOf(parts)]
    if key == "not":
        return [Negation(parse(value, path))]
    if key in COLLECTIONS:
        if not isinstance(value, Mapping):
            raise RequirementError(path, f"'{key}' takes a mapping of its properties")
        return [Some(key, parse(value, path))]
    if not _PROPERTY_NAME.match(key):
        raise RequirementError(path, f"{key!r} is not a property name")
    if isinstance(value, Mapping):
        if not value:
            raise RequirementError(path, "an operator mapping needs at least one operator")
        return [_compare(key, op, operand, path) for op, operand in value.items()]
    if isinstance(value, Sequence) and not isinstance(value, str):
        if not value:
            raise RequirementError(path, "a list of allowed values must not be empty")
        return [AnyOf(tuple(_compare(key, "=", v, f"{path}[{i}]") for i, v in enumerate(value)))]
    return [_compare(key, "=", value, path)]


def _compare(prop: str, op: object, value: object, path: str) -> Compare:
    if op == "==":
        op = "="
    if op not in OPERATORS:
        known = " ".join(OPERATORS)
        raise RequirementError(path, f"unknown operator {op!r} (expected one of {known})")
    assert isinstance(op, str)
    if not isinstance(value, str | int | float | bool):
        raise RequirementError(path, f"a value must be text or a number, got {_kind(value)}")
    if prop in SET_PROPERTIES and op not in _SET_OPERATORS:
        raise RequirementError(path, f"'{prop}' can only be compared with =, != or like")
    if op == "like" and not isinstance(value, str):
        raise RequirementError(path, "'like' needs a text pattern")
    return Compare(prop, op, value)


def _kind(value: object) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if value is None:
        return "nothing"
    return f"{type(value).__name__} {value!r}"


# --- writing the native form -------------------------------------------------


def to_native(req: Requirement) -> dict[str, Any]:
    """The native mapping for an expression; ``parse(to_native(r)) == r`` up to nesting."""
    if isinstance(req, Some):
        return {req.collection: to_native(req.term)}
    if isinstance(req, Compare):
        return {req.prop: req.value if req.op == "=" else {req.op: req.value}}
    if isinstance(req, Negation):
        return {"not": to_native(req.term)}
    if isinstance(req, AnyOf):
        return {"or": [to_native(t) for t in req.terms]}
    return (
        {"and": [to_native(t) for t in req.terms]}
        if len(req.terms) != 1
        else to_native(req.terms[0])
    )


def signature(req: Requirement) -> str:
    """A canonical text for an expression: equal meaning by structure, equal text.

    Terms of ``and``/``or`` are sorted, so order in the file does not matter. The
    scheduler groups recipes by this text.
    """
    return json.dumps(_canonical(req), sort_keys=True, separators=(",", ":"))


def _canonical(req: Requirement) -> object:
    if isinstance(req, Some):
        return ["some", req.collection, _canonical(req.term)]
    if isinstance(req, Compare):
        return [req.prop, req.op, req.value]
    if isinstance(req, Negation):
        return ["not", _canonical(req.term)]
    kind = "and" if isinstance(req, AllOf) else "or"
    terms = sorted((_canonical(t) for t in req.terms), key=lambda t: json.dumps(t, sort_keys=True))
    if len(terms) == 1:
        return terms[0]
    return [kind, *terms]


def properties(req: Requirement) -> frozenset[str]:
    """Every property an expression reads (a collection counts as one)."""
    if isinstance(req, Compare):
        return frozenset({req.prop})
    if isinstance(req, Some):
        return frozenset({req.collection})
    if isinstance(req, Negation):
        return properties(req.term)
    out: frozenset[str] = frozenset()
    for term in req.terms:
        out |= properties(term)
    return out


# --- evaluation --------------------------------------------------------------


def matches(req: Requirement, facts: Facts) -> bool:
    """Whether a system with these facts satisfies the expression."""
    if isinstance(req, Compare):
        return _holds(req, facts.get(req.prop))
    if isinstance(req, AllOf):
        return all(matches(t, facts) for t in req.terms)
    if isinstance(req, AnyOf):
        return any(matches(t, facts) for t in req.terms)
    if isinstance(req, Some):
        items = facts.get(req.collection)
        return isinstance(items, tuple) and any(matches(req.term, item) for item in items)
    return not matches(req.term, facts)


def exact(cmp: Compare) -> bool:
    """Whether the term holds exactly for systems whose fact equals its value.

    Such a term can be looked up in an index of facts. Not so: an empty value
    (it matches a system without the property), a date (it matches any time of
    that day) and a property a system has several values of.
    """
    if cmp.op != "=" or cmp.prop in SET_PROPERTIES:
        return False
    return cmp.value != "" and not _is_date(cmp.value)


def _is_date(value: Scalar) -> bool:
    return isinstance(value, str) and _DATE.match(value) is not None


def _holds(cmp: Compare, actual: Fact | None) -> bool:
    if isinstance(actual, tuple):
        return False  # a collection is read through Some, never compared whole
    if actual == "" or actual == frozenset():
        actual = None  # Beaker: an empty value is no value
    if cmp.value == "":
        return _holds_empty(cmp.op, actual)
    if actual is None:
        return cmp.op == "!="
    if isinstance(actual, frozenset):
        found = any(
            _holds(Compare(cmp.prop, "=" if cmp.op == "!=" else cmp.op, cmp.value), a)
            for a in actual
        )
        return not found if cmp.op == "!=" else found
    if cmp.op == "like":
        return _like_pattern(str(cmp.value)).fullmatch(str(actual)) is not None
    a, w = as_number(actual), as_number(cmp.value)
    if a is not None and w is not None:
        return _ordered(a, cmp.op, w)
    if _is_date(cmp.value) and isinstance(actual, str) and _DATED.match(actual):
        return _ordered(actual[:10], cmp.op, str(cmp.value))  # by day: ISO dates sort as text
    return _ordered(_text(actual), cmp.op, _text(cmp.value))


def _holds_empty(op: str, actual: Scalar | frozenset[str] | None) -> bool:
    """``prop = ""`` asks for no value, ``!=`` for some; an order against nothing never holds."""
    if op in ("=", "like"):
        return actual is None
    if op == "!=":
        return actual is not None
    return False


def _ordered(left: _T, op: str, right: _T) -> bool:
    if op == "=":
        return left == right
    if op == "!=":
        return left != right
    if op == "<":
        return left < right
    if op == "<=":
        return left <= right
    if op == ">":
        return left > right
    return left >= right


def as_number(value: Scalar) -> float | None:
    """A property's value as a number, or None where it is none (booleans included)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(value)
    except ValueError:
        return None


def _text(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@lru_cache(maxsize=4096)
def _like_pattern(pattern: str) -> re.Pattern[str]:
    out = []
    for ch in pattern:
        if ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(re.escape(ch))
    return re.compile("".join(out), re.IGNORECASE | re.DOTALL)
