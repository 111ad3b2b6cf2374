"""Placing a recipe set: a bipartite matching of recipes to viable systems.

Recipes with the same viability (same requirement signature, excludes and
group) are interchangeable, so the matching works on *classes* with a demand
count rather than on single recipes: a set of 128 identical recipes is one
class needing 128 systems. Augmenting paths (breadth-first, from a class with
unmet demand through systems already given to other classes) make the matching
maximum, so a set that can be placed is placed — first-fit is not enough when
one recipe's choice would starve another's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
S = TypeVar("S", bound=Hashable)


def gang_match(
    demands: Mapping[K, int],
    candidates: Mapping[K, Sequence[S]],
    *,
    taken: Iterable[S] = (),
) -> dict[K, list[S]]:
    """A maximum assignment of distinct systems to classes, at most ``demands[k]`` each.

    ``candidates[k]`` lists the systems class ``k`` may use, best first (earlier
    ones are preferred when several would do). Systems in ``taken`` are not used.
    The result may fall short of the demand: compare with :func:`is_complete`.
    """
    blocked = set(taken)
    owner: dict[S, K] = {}
    given: dict[K, list[S]] = {k: [] for k in demands}
    cursor = dict.fromkeys(demands, 0)
    for klass, demand in demands.items():
        for _ in range(demand):
            if not _take_free(klass, candidates, owner, blocked, given, cursor) and not _augment(
                klass, candidates, owner, blocked, given
            ):
                break
    return given


def is_complete(demands: Mapping[K, int], given: Mapping[K, Sequence[S]]) -> bool:
    """Whether every class got all the systems it asked for."""
    return all(len(given.get(k, ())) >= n for k, n in demands.items())


def _take_free(
    klass: K,
    candidates: Mapping[K, Sequence[S]],
    owner: dict[S, K],
    blocked: set[S],
    given: dict[K, list[S]],
    cursor: dict[K, int],
) -> bool:
    """The cheap path: the next never-used candidate, in preference order."""
    options = candidates.get(klass, ())
    i = cursor[klass]
    while i < len(options):
        system = options[i]
        i += 1
        if system not in owner and system not in blocked:
            cursor[klass] = i
            owner[system] = klass
            given[klass].append(system)
            return True
    cursor[klass] = i
    return False


def _augment(
    start: K,
    candidates: Mapping[K, Sequence[S]],
    owner: dict[S, K],
    blocked: set[S],
    given: dict[K, list[S]],
) -> bool:
    """Find a free system for ``start`` by moving other classes along an augmenting path."""
    came_from: dict[K, tuple[K, S] | None] = {start: None}
    queue: deque[K] = deque([start])
    while queue:
        klass = queue.popleft()
        for system in candidates.get(klass, ()):
            if system in blocked:
                continue
            holder = owner.get(system)
            if holder is None:
                _flip(klass, system, came_from, owner, given)
                return True
            if holder not in came_from:
                came_from[holder] = (klass, system)
                queue.append(holder)
    return False


def _flip(
    klass: K,
    system: S,
    came_from: Mapping[K, tuple[K, S] | None],
    owner: dict[S, K],
    given: dict[K, list[S]],
) -> None:
    """Walk the path back: each class takes the next system, giving up the one it had."""
    current: K | None = klass
    incoming: S = system
    while current is not None:
        owner[incoming] = current
        given[current].append(incoming)
        step = came_from[current]
        if step is None:
            return
        previous, handed_over = step
        given[current].remove(handed_over)
        incoming = handed_over
        current = previous
