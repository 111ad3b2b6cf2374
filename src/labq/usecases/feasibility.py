"""Refusing at submission a recipe set that no system can ever run (docs/scheduling.md).

"Ever" counts every system that is not removed: a broken or manual one may come
back, a busy one will be free. So a set is refused when one of its recipes has
no such system that matches it and that its group may use, or when no single lab
has one for each of its recipes at once; a set whose systems are only unusable
for now is stored, and waits.

The refusal names the field at fault (the property of a host requirement, the
``force``), on the line of the document it came from, and what is wrong with it
(``labq.domain.shortfall``): the same one-line form as every error in a document.

A recipe's distro requirement counts once some lab carries a tree (an empty
catalogue everywhere checks none, docs/scheduling.md): then a system serves it
only where its lab carries a tree the requirement admits for the system's arch,
and a requirement no lab meets is refused naming it and the trees that exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from labq.domain.distro import REQUIREMENT_KEY, DistroRequirement, DistroTree, requirement_of
from labq.domain.job import JobSpec, RecipeSetSpec, RecipeSpec
from labq.domain.model import EVERYBODY, AccessPolicy, System
from labq.domain.requirements import Facts, matches, signature
from labq.domain.shortfall import explain
from labq.domain.states import Condition
from labq.errors import InputError
from labq.formats.origins import Origins
from labq.formats.source import DocPath, format_path
from labq.scheduler.placement import gang_match, is_complete

SHOWN: Final = 8  # systems named in a refusal; more are counted
Known = tuple[System, Facts]


@dataclass(frozen=True)
class Fleet:
    """The systems submissions are checked against, each with its facts, and who may use
    them: made once for the jobs of a run, not once per job."""

    known: tuple[Known, ...]
    policy: AccessPolicy
    trees: tuple[DistroTree, ...] = ()  # every lab's distro trees

    @classmethod
    def of(
        cls, systems: Sequence[System], policy: AccessPolicy, trees: Sequence[DistroTree] = ()
    ) -> Fleet:
        """The fleet of ``systems`` (their facts worked out once, not per recipe)."""
        return cls(tuple((s, s.facts()) for s in systems), policy, tuple(trees))


def refuse_unrunnable(spec: JobSpec, fleet: Fleet, origins: Origins | None = None) -> None:
    """Raise an :class:`InputError` naming the first recipe set (or its recipe, or the field
    in it) no system of ``fleet`` can ever run; ``origins`` turn the field into the line
    and place of the document it was read from."""
    for index, recipe_set in enumerate(spec.recipe_sets):
        found = _never_runs(recipe_set, fleet, spec.group)
        if found is not None:
            field, key, problem = found
            path: DocPath = ("recipe_sets", index, *field)
            if origins is None:  # a spec without a document (a reservation): its own paths
                source, line, place = "", None, format_path((*path, key) if key else path)
            else:
                source = origins.source
                line, place = origins.locate(path, key)
            raise InputError(f"can never run: {problem}", source=source, place=place, line=line)


# the field of a recipe set a refusal is about, the key to look for inside it, the problem
Refusal = tuple[DocPath, str | None, str]


def _never_runs(recipe_set: RecipeSetSpec, fleet: Fleet, group: str | None) -> Refusal | None:
    """Why the set can never run, or None if it can."""
    candidates: dict[int, list[System]] = {}
    alike: dict[tuple[str, tuple[str, ...], str | None, str | None], list[System]] = {}
    for index, recipe in enumerate(recipe_set.recipes):
        distro = requirement_of(recipe.metadata) if fleet.trees else None
        key = (
            signature(recipe.host),
            tuple(sorted(recipe.exclude)),
            recipe.force,
            None if distro is None else distro.key,
        )
        if key not in alike:  # recipes with one requirement share their systems
            usable = _could_serve(recipe, fleet.known, group, fleet.policy)
            if not isinstance(usable, tuple) and distro is not None:
                usable = _with_tree(usable, distro, fleet)
            if isinstance(usable, tuple):
                field, prop, problem = usable
                return ("recipes", index, *field), prop, problem
            alike[key] = usable
        candidates[index] = alike[key]
    demands = dict.fromkeys(candidates, 1)
    for lab in sorted({s.lab for found in candidates.values() for s in found}):
        in_lab = {i: [s.fqdn for s in found if s.lab == lab] for i, found in candidates.items()}
        if is_complete(demands, gang_match(demands, in_lab)):
            return None
    count = len(recipe_set.recipes)
    return (), None, f"no single lab has a system for each of its {count} recipes at once"


def _could_serve(
    recipe: RecipeSpec, systems: Sequence[Known], group: str | None, policy: AccessPolicy
) -> list[System] | Refusal:
    """The systems that could ever serve the recipe, or why there are none."""
    if recipe.force is not None and not any(s.fqdn == recipe.force for s, _ in systems):
        # a teuthology target, a Beaker force=: name it, the user mistyped it or must add it
        return (
            ("force",),
            None,
            f"it is forced onto {recipe.force!r}, which is not a system labq knows",
        )
    eligible = [
        (s, facts)
        for s, facts in systems
        if s.fqdn not in recipe.exclude and (recipe.force is None or s.fqdn == recipe.force)
    ]
    if not eligible:
        return ("exclude",), None, "it excludes every system it could run on"
    matching = [s for s, facts in eligible if matches(recipe.host, facts)]
    if not matching:
        why = explain(recipe.host, [facts for _, facts in eligible])
        forced = "" if recipe.force is None else f"it is forced onto {recipe.force}, and "
        return ("host",), why.prop, forced + why.problem
    present = [s for s in matching if s.condition is not Condition.REMOVED]
    if not present:
        return (), None, f"every matching system is removed: {_names(matching)}"
    allowed = [s for s in present if policy.maximum(s.pools, group) is not None]
    if not allowed:
        who = group or EVERYBODY
        names = _names(present)
        return (), None, f"every matching system is in a pool group {who!r} may not use: {names}"
    return allowed


def _with_tree(
    systems: list[System], distro: DistroRequirement, fleet: Fleet
) -> list[System] | Refusal:
    """The systems whose lab carries a tree ``distro`` admits for their arch, or why none."""
    admitted = [t for t in fleet.trees if distro.admits(t)]
    field: DocPath = ("metadata", REQUIREMENT_KEY)
    if not admitted:
        carried = _carried(fleet.trees)
        return field, None, f"distro {distro.describe()}: no lab carries it ({carried})"
    facts = {s.fqdn: f for s, f in fleet.known}
    served = [
        s
        for s in systems
        if any(t.lab == s.lab and t.fits(s.arch, _machine_type(facts[s.fqdn])) for t in admitted)
    ]
    if not served:
        where = _carried(admitted)
        problem = f"distro {distro.describe()}: no system it could run on is in a lab carrying"
        return field, None, f"{problem} it for the system's arch ({where})"
    return served


def _machine_type(facts: Facts) -> str | None:
    value = facts.get("machine_type")
    return None if value in (None, "") else str(value)


def _carried(trees: Sequence[DistroTree]) -> str:
    """What the labs carry, in a few words: ``lab1 has Fedora40 x86_64, ...; lab2 has ...``."""
    by_lab: dict[str, list[str]] = {}
    for tree in trees:
        named = f"{tree.family or tree.name} {tree.arch}"
        if named not in by_lab.setdefault(tree.lab, []):
            by_lab[tree.lab].append(named)
    parts = []
    for lab, names in sorted(by_lab.items()):
        more = len(names) - SHOWN
        shown = ", ".join(names[:SHOWN]) + (f" and {more} more" if more > 0 else "")
        parts.append(f"{lab} has {shown}")
    return "; ".join(parts)


def _names(systems: Sequence[System]) -> str:
    names = sorted(s.fqdn for s in systems)
    more = len(names) - SHOWN
    return ", ".join(names[:SHOWN]) + (f" and {more} more" if more > 0 else "")
