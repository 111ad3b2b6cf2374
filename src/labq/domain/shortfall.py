"""Why no system matches a host requirement, in words that point at the term to change.

A submission that no system can ever run is refused (``usecases/feasibility.py``); "no
system matches" alone leaves the person guessing. Here the requirement is taken
apart into the terms that must all hold, and the refusal names the one at fault:
a property no system records (a typo, most often: the nearest name is offered),
a system name that does not exist, or a value no system has, with what systems do
have. When every term alone holds somewhere but never all together, the term that
leaves the fewest systems is named, and the rest is explained among those.

Everything here is pure: facts in, words out.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from labq.domain.job import JobSpec
from labq.domain.requirements import (
    AllOf,
    AnyOf,
    Compare,
    Facts,
    Negation,
    Requirement,
    Scalar,
    Some,
    as_number,
    matches,
)

# what every system has, or may have without any admin saying so (requirements.py)
BUILTIN: Final = frozenset(
    {
        "fqdn",
        "lab",
        "arch",
        "owner",
        "pool",
        "condition",
        "added",
        "cpu_flag",
        "device",
        "disk",
        "disk_count",
        "disk_space",
        "last_inventoried",
    }
)
Path = tuple[str | int, ...]  # a place in the native form of a job
SHOWN: Final = 8  # values or names listed in one message; more are counted
_ORDERS: Final = frozenset({"<", "<=", ">", ">="})


@dataclass(frozen=True)
class Shortfall:
    """Why nothing matches: ``prop`` is the property the problem is about (to find it in
    the document), None when it is about the requirement as a whole."""

    prop: str | None
    problem: str


def recorded(facts: Iterable[Facts]) -> frozenset[str]:
    """Every property that at least one system records."""
    out: set[str] = set()
    for one in facts:
        out.update(k for k, v in one.items() if v not in ("", frozenset(), ()))
    return frozenset(out)


def unknown(req: Requirement, known: frozenset[str]) -> list[str]:
    """The properties ``req`` asks systems to have that no system records and none has by
    itself, in the order they are written (what ``labq validate`` warns about).

    A term that a system without the property satisfies asks for none (``hypervisor:
    ""``, Beaker's bare metal; ``!=``): it is not counted.
    """
    out: list[str] = []
    for prop in _reads(req, wanted=True):
        if prop not in known and prop not in BUILTIN and prop not in out:
            out.append(prop)
    return out


def unrecorded(spec: JobSpec, known: frozenset[str]) -> Iterator[tuple[Path, str]]:
    """``(host path, property)`` for each property of a recipe's host requirement that no
    system records, recipe by recipe."""
    for i, recipe_set in enumerate(spec.recipe_sets):
        for j, recipe in enumerate(recipe_set.recipes):
            for prop in unknown(recipe.host, known):
                yield ("recipe_sets", i, "recipes", j, "host"), prop


def unknown_problem(prop: str, known: frozenset[str]) -> str:
    """``memroy_mb: no system records this property; did you mean memory_mb? (…)``."""
    close = difflib.get_close_matches(prop, sorted(known | BUILTIN), n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    own = sorted(known - BUILTIN)  # the built-in ones are in docs/job-format.md
    have = f"systems record {_listed(own) if own else 'none'} besides the built-in ones"
    return f"{prop}: no system records this property{hint} ({have})"


def explain(req: Requirement, facts: Sequence[Facts]) -> Shortfall:
    """Why no system of ``facts`` matches ``req`` (which matches none of them)."""
    known = recorded(facts)
    terms = list(_conjuncts(req))
    pool = list(facts)
    steps: list[str] = []
    while terms:
        holders = [[f for f in pool if matches(t, f)] for t in terms]
        failing = [t for t, found in zip(terms, holders, strict=True) if not found]
        if failing:
            culprit = next((t for t in failing if unknown(t, known)), failing[0])
            shortfall = _describe(culprit, pool, known, among=bool(steps))
            return Shortfall(shortfall.prop, "; of those, ".join([*steps, shortfall.problem]))
        fewest = min(range(len(terms)), key=lambda i: len(holders[i]))
        held = len(holders[fewest])
        steps.append(f"{render(terms[fewest])} holds on {held} of {len(pool)} systems")
        pool = holders[fewest]
        del terms[fewest]
    # only an empty conjunction is left, and it matches every system: there were none
    return Shortfall(None, "labq knows no system")


def render(req: Requirement) -> str:
    """A requirement as a person writes it: ``memory_mb >= 4096 and arch = x86_64``."""
    if isinstance(req, Compare):
        return f"{req.prop} {req.op} {_value(req.value)}"
    if isinstance(req, Some):
        return f"a {req.collection} with {render(req.term)}"
    if isinstance(req, Negation):
        return f"not ({render(req.term)})"
    if not req.terms:
        return "any system" if isinstance(req, AllOf) else "nothing"
    word = " and " if isinstance(req, AllOf) else " or "
    return word.join(
        f"({render(t)})" if isinstance(t, AllOf | AnyOf) and len(t.terms) > 1 else render(t)
        for t in req.terms
    )


def _conjuncts(req: Requirement) -> Iterator[Requirement]:
    if isinstance(req, AllOf):
        for term in req.terms:
            yield from _conjuncts(term)
    else:
        yield req


def _reads(req: Requirement, *, wanted: bool = False) -> Iterator[str]:
    """The properties of ``req`` in written order (a collection counts as one); ``wanted``:
    only those of terms a system without the property fails."""
    if isinstance(req, Compare):
        if not (wanted and (req.op == "!=" or req.value == "")):
            yield req.prop
    elif isinstance(req, Some):
        yield req.collection
    elif isinstance(req, Negation):
        yield from _reads(req.term, wanted=wanted)
    else:
        for term in req.terms:
            yield from _reads(term, wanted=wanted)


def _describe(
    term: Requirement, pool: Sequence[Facts], known: frozenset[str], *, among: bool
) -> Shortfall:
    """Why no system of ``pool`` satisfies ``term``."""
    missing = unknown(term, known)
    if missing:
        return Shortfall(missing[0], unknown_problem(missing[0], known))
    nobody = "none of them" if among else "no system"
    if not isinstance(term, Compare):
        return Shortfall(next(_reads(term), None), f"{render(term)}: {nobody} matches it")
    shown = render(term)
    if term.prop == "fqdn" and term.op == "=" and not among:
        return Shortfall(term.prop, f"{shown}: no such system")
    if term.op == "!=":
        return Shortfall(term.prop, f"{shown}: every {'one' if among else 'system'} has it")
    found = _what_they_have(term, pool, among=among)
    return Shortfall(term.prop, f"{shown}: {nobody} has it ({found})")


def _what_they_have(term: Compare, pool: Sequence[Facts], *, among: bool) -> str:
    values: list[Scalar] = []
    for facts in pool:
        fact = facts.get(term.prop)
        if isinstance(fact, frozenset):
            values.extend(fact)
        elif fact is not None and not isinstance(fact, tuple) and fact != "":
            values.append(fact)
    if not values:
        return f"{'none' if among else 'no system'} records {term.prop}"
    numbers = [n for n in map(as_number, values) if n is not None]
    if term.op in _ORDERS and numbers:
        if term.op.startswith(">"):
            return f"largest {_value(max(numbers))}"
        return f"smallest {_value(min(numbers))}"
    distinct = sorted({_value(v) for v in values})
    return f"they have {_listed(distinct)}"


def _listed(names: Sequence[str]) -> str:
    more = len(names) - SHOWN
    return ", ".join(names[:SHOWN]) + (f" and {more} more" if more > 0 else "")


def _value(value: Scalar | float) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value == "":
        return '""'
    return str(value)
