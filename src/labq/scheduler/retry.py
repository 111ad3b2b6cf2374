"""Re-scheduling aborted recipe sets on other systems (seed 003)."""

from __future__ import annotations

from collections.abc import Mapping

from labq.domain.model import AccessPolicy
from labq.domain.states import Condition, RecipeState
from labq.scheduler import decisions as d
from labq.scheduler.entries import RecipeEntry, SetEntry, SystemEntry, ViabilityClass
from labq.scheduler.index import ClassIndex, meets


def retry_decision(
    entry: SetEntry,
    aborted_on: Mapping[int, str],
    *,
    index: ClassIndex,
    systems: Mapping[str, SystemEntry],
    policy: AccessPolicy,
    hard_limit: int,
) -> d.Retry | d.SetError | None:
    """A clone with accumulated excludes, an error saying why there is none, or nothing.

    Only sets that ended with an aborted recipe are retried, never cancelled ones,
    and at most ``min(max_retries, retry.hard_limit)`` times.
    """
    if not aborted_on or any(r.state is RecipeState.CANCELLED for r in entry.recipes):
        return None
    if entry.attempt - 1 >= entry.max_retries:
        return None
    if entry.attempt - 1 >= hard_limit:  # said, so nobody waits for a retry
        return d.SetError(
            entry.id,
            f"not re-scheduled: the retry limit is reached (retry.hard_limit = {hard_limit})",
        )
    excluded: dict[int, frozenset[str]] = {}
    problems = []
    for recipe in entry.recipes:
        klass = index.classes[recipe.klass]
        if recipe.id not in aborted_on:
            excluded[recipe.index] = klass.excluded
            continue
        avoid = klass.excluded | {aborted_on[recipe.id]}
        excluded[recipe.index] = avoid
        avoiding = ViabilityClass(klass.requirement, avoid, klass.force, klass.distro)
        problem = _why_nothing_fits(entry, recipe, avoiding, systems, policy)
        if problem:
            problems.append(problem)
    if problems:
        return d.SetError(entry.id, "not re-scheduled: " + "; ".join(problems))
    return d.Retry(entry.id, entry.attempt + 1, excluded)


def _why_nothing_fits(
    entry: SetEntry,
    recipe: RecipeEntry,
    klass: ViabilityClass,
    systems: Mapping[str, SystemEntry],
    policy: AccessPolicy,
) -> str:
    """Empty when another system could serve the recipe, else the reason in plain words."""
    matching = [
        system
        for system in systems.values()
        if meets(system, ViabilityClass(klass.requirement, frozenset(), klass.force))
    ]
    others = [m for m in matching if m.fqdn not in klass.excluded]
    usable = [  # broken and manual systems may come back: the clone waits for them
        m
        for m in others
        if m.condition is not Condition.REMOVED and policy.maximum(m.pools, entry.group) is not None
    ]
    if usable:
        return ""
    name = f"recipe {recipe.id}" + (f" (role {recipe.role})" if recipe.role else "")
    avoided = ", ".join(sorted(klass.excluded))
    reasons = []
    for m in others:
        if m.condition is Condition.REMOVED:
            reasons.append(f"{m.fqdn} is removed")
        else:
            reasons.append(f"{m.fqdn} is in no pool group {entry.group or 'everybody'} may use")
    why = "; ".join(reasons) if reasons else "no other system matches its host requirements"
    return f"{name} aborted and has no other system: it excludes {avoided}, and {why}"
