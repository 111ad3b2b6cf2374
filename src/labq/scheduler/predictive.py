"""The predictive weight of queued sets (seed 004), kept up to date without walking sets.

Running sets are kept aggregated per level — how many declare each kind, and
which names are declared shared or exclusive — so the worst contention a queued
set meets on a level costs the number of kinds, not the number of running sets.
A running set's real held locks replace its declaration once the lock service
reports them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from labq.domain.contention import (
    NAMED_CLASH,
    TABLE,
    WHOLE_LAB_SPV,
    LockNeeds,
)
from labq.domain.locks import WHOLE_LAB, LockDecl, LockKind
from labq.domain.locktable import ALL, Grant

Contribution = tuple[tuple[str, LockDecl], ...]  # (level, declaration), a level may repeat


def declared(needs: LockNeeds, levels: Sequence[str]) -> Contribution:
    """What a running set counts as on every level: the whole lab is AllExclusive everywhere."""
    if needs.whole_lab:
        return tuple((level, LockDecl(LockKind.ALL_EXCLUSIVE)) for level in levels)
    return tuple((level, needs.at(level)) for level in levels)


def held(
    grants: Iterable[Grant], levels: Sequence[str], needs: LockNeeds | None = None
) -> Contribution:
    """What a running set counts as, from the locks it really holds.

    On a level where it holds nothing yet, its declaration ``needs`` still
    counts: an ``unknown`` lock it has not taken yet is still to come.
    """
    if needs is not None and needs.whole_lab:
        return declared(needs, levels)  # it has, or is about to have, the whole lab
    shared: dict[str, set[str]] = {}
    exclusive: dict[str, set[str]] = {}
    for grant in grants:
        if grant.level == WHOLE_LAB:
            if grant.exclusive:
                return declared(LockNeeds(whole_lab=True), levels)
            continue  # every holder takes the whole-lab lock shared: it says nothing
        (exclusive if grant.exclusive else shared).setdefault(grant.level, set()).add(grant.name)
    out: list[tuple[str, LockDecl]] = []
    for level in levels:
        found = [
            _decl(names, is_exclusive)
            for names, is_exclusive in ((shared.get(level), False), (exclusive.get(level), True))
            if names
        ]
        fallback = LockDecl(LockKind.NONE) if needs is None else needs.at(level)
        out.extend((level, decl) for decl in found or [fallback])
    return tuple(out)


def _decl(names: set[str], is_exclusive: bool) -> LockDecl:
    if ALL in names:
        return LockDecl(LockKind.ALL_EXCLUSIVE if is_exclusive else LockKind.ALL_SHARED)
    kind = LockKind.EXCLUSIVE if is_exclusive else LockKind.SHARED
    return LockDecl(kind, frozenset(names))


class RunningLocks:
    """The lock declarations (or holdings) of running sets, aggregated per level."""

    def __init__(self, levels: Sequence[str]):
        self.levels = tuple(levels)
        self._kinds: dict[str, Counter[LockKind]] = {level: Counter() for level in self.levels}
        self._names: dict[tuple[str, LockKind], Counter[str]] = {}
        self._of: dict[int, Contribution] = {}

    def __len__(self) -> int:
        return len(self._of)

    def __contains__(self, set_id: object) -> bool:
        return set_id in self._of

    def put(self, set_id: int, contribution: Contribution) -> bool:
        """Count (or recount) a running set; whether anything changed."""
        if self._of.get(set_id) == contribution:
            return False
        self.remove(set_id)
        self._of[set_id] = contribution
        for level, decl in contribution:
            self._kinds[level][decl.kind] += 1
            if decl.names:
                self._names.setdefault((level, decl.kind), Counter()).update(decl.names)
        return True

    def remove(self, set_id: int) -> bool:
        """A set stopped running; whether it was counted."""
        contribution = self._of.pop(set_id, None)
        if contribution is None:
            return False
        for level, decl in contribution:
            self._kinds[level][decl.kind] -= 1
            if decl.names:
                self._names[(level, decl.kind)].subtract(decl.names)
        return True

    def worst(self, level: str, pending: LockDecl) -> float:
        """The largest table cell for ``pending`` against any running set on ``level``."""
        row = TABLE[pending.kind]
        worst = 0.0
        for kind, count in self._kinds[level].items():
            if count <= 0:
                continue
            cell = row[kind]
            if (pending.kind, kind) in NAMED_CLASH and self._overlaps(level, kind, pending.names):
                cell = 3.0
            worst = max(worst, cell)
        return worst

    def _overlaps(self, level: str, kind: LockKind, names: frozenset[str]) -> bool:
        counted = self._names.get((level, kind))
        return counted is not None and any(counted[name] > 0 for name in names)

    def spv(self, needs: LockNeeds, base: float) -> float:
        """``base + Σ levels worst contention``; ``base + 15`` for the whole lab."""
        if needs.whole_lab:
            return base + WHOLE_LAB_SPV
        return base + sum(self.worst(level, decl) for level, decl in needs.levels)
