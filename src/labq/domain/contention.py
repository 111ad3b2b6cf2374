"""Lock contention and the static predictive value (seed 004, Ganeti's predictive queue).

``contention(pending, running)`` is the seed's table cell for cell: the first
operand is what a queued set declares on a level, the second what a running set
declares (or really holds) there. Two named declarations are "the same
resource" when their name sets overlap.

``spv`` sums, over the lock levels, the worst contention a queued set meets among
the running sets; a set that needs the whole lab scores ``base + 15`` (3, the
worst cell, times the 5 levels), and — unlike Ganeti, which scored it as holding
nothing — a running set that holds the whole lab counts as ``AllExclusive`` on
every level.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from labq.domain.locks import NO_LOCK, WHOLE_LAB, LockDecl, LockKind

K = LockKind
WHOLE_LAB_SPV: Final = 15.0  # the worst cell (3) times the seed's five levels

# Cells that do not depend on names: TABLE[pending][running].
TABLE: Final[dict[LockKind, dict[LockKind, float]]] = {
    K.NONE: dict.fromkeys(K, 0.0),
    K.SHARED: {
        K.NONE: 0.3,
        K.SHARED: 0.0,
        K.UNKNOWN_SHARED: 0.0,
        K.ALL_SHARED: 0.0,
        K.EXCLUSIVE: 0.3,  # 3 when the names overlap
        K.UNKNOWN_EXCLUSIVE: 1.5,
        K.ALL_EXCLUSIVE: 3.0,
    },
    K.UNKNOWN_SHARED: {
        K.NONE: 0.3,
        K.SHARED: 0.3,
        K.UNKNOWN_SHARED: 0.3,
        K.ALL_SHARED: 0.3,
        K.EXCLUSIVE: 1.5,
        K.UNKNOWN_EXCLUSIVE: 1.5,
        K.ALL_EXCLUSIVE: 3.0,
    },
    K.ALL_SHARED: {
        K.NONE: 0.3,
        K.SHARED: 0.3,
        K.UNKNOWN_SHARED: 0.3,
        K.ALL_SHARED: 0.3,
        K.EXCLUSIVE: 3.0,
        K.UNKNOWN_EXCLUSIVE: 3.0,
        K.ALL_EXCLUSIVE: 3.0,
    },
    K.EXCLUSIVE: {
        K.NONE: 0.5,
        K.SHARED: 0.5,  # 3 when the names overlap
        K.UNKNOWN_SHARED: 1.5,
        K.ALL_SHARED: 3.0,
        K.EXCLUSIVE: 0.5,  # 3 when the names overlap
        K.UNKNOWN_EXCLUSIVE: 1.5,
        K.ALL_EXCLUSIVE: 3.0,
    },
    K.UNKNOWN_EXCLUSIVE: {
        K.NONE: 0.5,
        K.SHARED: 1.5,
        K.UNKNOWN_SHARED: 1.5,
        K.ALL_SHARED: 3.0,
        K.EXCLUSIVE: 1.5,
        K.UNKNOWN_EXCLUSIVE: 1.5,
        K.ALL_EXCLUSIVE: 3.0,
    },
    K.ALL_EXCLUSIVE: {
        K.NONE: 0.5,
        K.SHARED: 3.0,
        K.UNKNOWN_SHARED: 3.0,
        K.ALL_SHARED: 3.0,
        K.EXCLUSIVE: 3.0,
        K.UNKNOWN_EXCLUSIVE: 3.0,
        K.ALL_EXCLUSIVE: 3.0,
    },
}

# The named pairs whose cell is 3 when the two name sets overlap.
NAMED_CLASH: Final = frozenset(
    {(K.SHARED, K.EXCLUSIVE), (K.EXCLUSIVE, K.SHARED), (K.EXCLUSIVE, K.EXCLUSIVE)}
)


def contention(pending: LockDecl, running: LockDecl) -> float:
    """The seed's table: how likely ``pending`` is to wait behind ``running`` on one level."""
    if (pending.kind, running.kind) in NAMED_CLASH and pending.names & running.names:
        return 3.0
    return TABLE[pending.kind][running.kind]


@dataclass(frozen=True)
class LockNeeds:
    """A set's declarations: one per level that needs something, and the whole-lab lock."""

    levels: tuple[tuple[str, LockDecl], ...] = ()
    whole_lab: bool = False
    _by_level: dict[str, LockDecl] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_level.update(self.levels)

    @classmethod
    def of(cls, parsed: Mapping[str, Any]) -> LockNeeds:
        """From :func:`labq.domain.locks.parse_locks`'s ``{level: LockDecl, whole_lab: bool}``."""
        levels = tuple(
            sorted(
                (level, decl)
                for level, decl in parsed.items()
                if level != WHOLE_LAB and isinstance(decl, LockDecl) and decl.kind is not K.NONE
            )
        )
        return cls(levels, bool(parsed.get(WHOLE_LAB, False)))

    def at(self, level: str) -> LockDecl:
        """The declaration on ``level`` (None when the set declared nothing there)."""
        return self._by_level.get(level, NO_LOCK)

    @property
    def declares(self) -> bool:
        """Whether the set needs any lock at all."""
        return self.whole_lab or bool(self.levels)


NO_NEEDS: Final = LockNeeds()


def spv(
    pending: LockNeeds, running: Iterable[LockNeeds], levels: Iterable[str], base: float
) -> float:
    """The static predictive value, straight from the seed's formula (the reference).

    The scheduler keeps running sets aggregated (:class:`RunningLocks`) instead
    of walking them; both must agree, and the tests check that they do.
    """
    if pending.whole_lab:
        return base + WHOLE_LAB_SPV
    others = list(running)
    value = base
    for level in levels:
        cells = [contention(pending.at(level), _as_running(other, level)) for other in others]
        value += max(cells, default=0.0)
    return value


def _as_running(needs: LockNeeds, level: str) -> LockDecl:
    return LockDecl(K.ALL_EXCLUSIVE) if needs.whole_lab else needs.at(level)


def weight(spv_value: float, age_ticks: int, aging_ticks: int) -> float:
    """``spv * max(0, 1 - age / K)``: the seed's aging, 0 after ``aging_ticks`` ticks."""
    if aging_ticks <= 0:
        return 0.0
    return spv_value * max(0.0, 1.0 - age_ticks / aging_ticks)


def age_ticks(waited: float, tick: float) -> int:
    """Time waited, in whole ticks (the seed's quantised age)."""
    if tick <= 0:
        return 0
    return max(0, math.floor(waited / tick))
