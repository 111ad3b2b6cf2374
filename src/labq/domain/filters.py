"""Queue filter rules (Ganeti's job filters) and reason rate limits.

A rule has a priority (lower is tried first; ties by id), an action and
predicates that must all hold for the rule to match a job. The first matching
rule whose action is not ``continue`` decides; when none does the job is
accepted. ``pause`` keeps the job's sets from taking systems, ``reject``
refuses or cancels the job, ``rate-limit N`` lets at most N of the sets it
matched run at once (bucket ``filter:<id>``).

A job's ``reason`` may carry ``rate-limit:N:label`` items: at most N sets of
jobs with that label run at once (bucket ``reason:<label>``).

Everything here is pure: rules and job facts in, verdicts out.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Final

ACTIONS: Final = ("accept", "continue", "pause", "reject", "rate-limit")
FIELDS: Final = ("job", "group", "owner", "whiteboard", "reason")
NUMBER_OPS: Final = ("=", "!=", "<", "<=", ">", ">=")
TEXT_OPS: Final = ("=", "!=", "~")
EVERYBODY: Final = "everybody"  # the group of a job submitted without one
RATE_PREFIX: Final = "rate-limit:"
MAX_VALUE: Final = 1000

_PREDICATE = re.compile(r"^\s*([a-z]+)\s*(<=|>=|!=|=|<|>|~)(.*)$", re.S)
_COMPARE: Final[Mapping[str, Callable[[int, int], bool]]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class FilterError(ValueError):
    """A rule, a predicate or a reason that cannot be read, in plain words."""


@dataclass(frozen=True)
class JobFacts:
    """What predicates look at: a job's id, group, owner, whiteboard and reason."""

    id: int
    owner: str
    group: str | None = None  # None: submitted without one (counts as ``everybody``)
    whiteboard: str | None = None
    reason: str | None = None

    def value_of(self, field: str) -> int | str:
        """The value a predicate on ``field`` compares (missing text is empty)."""
        if field == "job":
            return self.id
        if field == "group":
            return self.group or EVERYBODY
        if field == "owner":
            return self.owner
        if field == "whiteboard":
            return self.whiteboard or ""
        if field == "reason":
            return self.reason or ""
        raise FilterError(f"unknown field {field!r}")


@dataclass(frozen=True)
class Predicate:
    """``field op value``: ``job>=12``, ``owner=alice``, ``whiteboard~nightly*``."""

    field: str
    op: str
    value: int | str

    def holds(self, job: JobFacts) -> bool:
        """Whether this predicate is true of ``job``."""
        have = job.value_of(self.field)
        if isinstance(self.value, int) and isinstance(have, int):
            return _COMPARE[self.op](have, self.value)
        text, wanted = str(have), str(self.value)
        if self.op == "~":
            return fnmatchcase(text, wanted)
        return (text == wanted) == (self.op == "=")

    def __str__(self) -> str:
        return f"{self.field}{self.op}{self.value}"

    def to_native(self) -> dict[str, int | str]:
        """The stored form."""
        return {"field": self.field, "op": self.op, "value": self.value}


def parse_predicate(text: str) -> Predicate:
    """``owner=alice`` → a predicate; a plain-words :class:`FilterError` when it is not one."""
    found = _PREDICATE.match(text)
    if found is None:
        raise FilterError(
            f"{text!r} is not a predicate (expected FIELD OP VALUE, e.g. owner=alice,"
            " job>=12, whiteboard~nightly*)"
        )
    field, op, raw = found.group(1), found.group(2), found.group(3).strip()
    return make_predicate(field, op, raw)


def make_predicate(field: str, op: str, value: object) -> Predicate:
    """A checked predicate from its parts (a stored rule, or a parsed one)."""
    if field not in FIELDS:
        raise FilterError(f"unknown field {field!r} (expected one of {', '.join(FIELDS)})")
    if field == "job":
        if op not in NUMBER_OPS:
            raise FilterError(f"job takes one of {' '.join(NUMBER_OPS)}, not {op!r}")
        number = value if isinstance(value, int) and not isinstance(value, bool) else None
        if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
            number = int(value)
        if number is None:
            raise FilterError(f"job compares with a job id, not {value!r}")
        return Predicate(field, op, number)
    if op not in TEXT_OPS:
        raise FilterError(f"{field} takes one of {' '.join(TEXT_OPS)}, not {op!r}")
    if not isinstance(value, str):
        raise FilterError(f"{field} compares with text, not {value!r}")
    if len(value) > MAX_VALUE:
        raise FilterError(f"a value is at most {MAX_VALUE} characters")
    return Predicate(field, op, value)


@dataclass(frozen=True)
class Rule:
    """One filter rule, as stored."""

    id: int
    priority: int
    action: str
    predicates: tuple[Predicate, ...] = ()
    rate: int | None = None
    comment: str | None = None

    def matches(self, job: JobFacts) -> bool:
        """All predicates hold (a rule without any matches every job)."""
        return all(p.holds(job) for p in self.predicates)

    def describe(self) -> str:
        """``filter 3: <comment>`` as reasons quote it."""
        return f"filter {self.id}" + (f": {self.comment}" if self.comment else "")


def check_rule(action: str, rate: int | None, priority: int) -> None:
    """Raise :class:`FilterError` unless action, rate and priority go together."""
    if action not in ACTIONS:
        raise FilterError(f"unknown action {action!r} (expected one of {', '.join(ACTIONS)})")
    if action == "rate-limit" and (rate is None or rate < 1):
        raise FilterError("rate-limit needs a rate of at least 1 (how many may run at once)")
    if action != "rate-limit" and rate is not None:
        raise FilterError(f"only rate-limit takes a rate, not {action}")
    if priority < 0:
        raise FilterError(f"a priority is 0 or more, not {priority}")


@dataclass(frozen=True)
class Decision:
    """What the rules decide about one job; ``rule`` is the deciding rule (None: no rule)."""

    action: str = "accept"
    rule: Rule | None = None

    @property
    def blocked(self) -> str | None:
        """Why a paused job may not take systems (None unless ``pause``)."""
        if self.action != "pause" or self.rule is None:
            return None
        return f"paused by {self.rule.describe()}"

    @property
    def rejected(self) -> str | None:
        """Why a job is refused (None unless ``reject``)."""
        if self.action != "reject" or self.rule is None:
            return None
        return f"rejected by {self.rule.describe()}"

    @property
    def buckets(self) -> tuple[tuple[str, int], ...]:
        """The rate-limit bucket of the deciding rule, if it limits."""
        if self.action != "rate-limit" or self.rule is None or self.rule.rate is None:
            return ()
        return ((f"filter:{self.rule.id}", self.rule.rate),)


def ordered(rules: Iterable[Rule]) -> list[Rule]:
    """Rules in the order they are tried: priority, then id."""
    return sorted(rules, key=lambda r: (r.priority, r.id))


def decide(rules: Sequence[Rule], job: JobFacts) -> Decision:
    """The first matching rule that is not ``continue`` decides; none: accept."""
    for rule in ordered(rules):
        if rule.action != "continue" and rule.matches(job):
            return Decision(rule.action, rule)
    return Decision()


# --- reason rate limits -------------------------------------------------------------


def reason_buckets(reason: str | None) -> tuple[tuple[str, int], ...]:
    """The ``reason:<label>`` buckets a reason names, the smallest limit per label.

    Items that are not ``rate-limit:N:label`` are ordinary words of the reason.
    """
    limits: dict[str, int] = {}
    for item in (reason or "").split():
        parsed = _rate_item(item)
        if parsed is not None:
            label, limit = parsed
            limits[label] = min(limit, limits.get(label, limit))
    return tuple((f"reason:{label}", limits[label]) for label in sorted(limits))


def check_reason(reason: str) -> None:
    """Raise :class:`FilterError` for a ``rate-limit:`` item that is not ``rate-limit:N:label``."""
    for item in reason.split():
        if item.startswith(RATE_PREFIX) and _rate_item(item) is None:
            raise FilterError(
                f"{item!r} is not a rate limit (expected rate-limit:N:label, N at least 1)"
            )


def _rate_item(item: str) -> tuple[str, int] | None:
    if not item.startswith(RATE_PREFIX):
        return None
    count, sep, label = item.removeprefix(RATE_PREFIX).partition(":")
    if not sep or not label or not (count.isascii() and count.isdigit()) or int(count) < 1:
        return None
    return label, int(count)
