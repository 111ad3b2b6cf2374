"""A baseline's books of recipe sets: what each set holds, and the waiting queue."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from labq.domain.priority import Priority
from labq.scheduler.entries import RecipeSubmission, SetSubmission

Placement = dict[int, str]  # recipe id -> system


@dataclass(eq=False)
class SetState:
    """A recipe set as a baseline sees it."""

    sub: SetSubmission
    priority: Priority
    klass: dict[int, int]  # recipe id -> viability class id
    placed: Placement = field(default_factory=dict)
    lab: str | None = None
    started_at: float | None = None
    finished: bool = False

    @property
    def id(self) -> int:
        """The set's id."""
        return self.sub.id

    @property
    def size(self) -> int:
        """How many systems the whole set needs."""
        return len(self.sub.recipes)

    @property
    def max_time(self) -> float | None:
        """The declared maximum run time, if any."""
        return self.sub.max_time

    @property
    def waiting(self) -> bool:
        """Not started and not finished."""
        return not self.finished and self.started_at is None

    def unplaced(self) -> list[RecipeSubmission]:
        """Recipes without a system yet."""
        return [r for r in self.sub.recipes if r.id not in self.placed]

    def order(self) -> tuple[int, float, int]:
        """The usual queue order: priority first, then first come, first served."""
        return (-int(self.priority), self.sub.submitted, self.sub.id)


OrderKey = Callable[[SetState], tuple[int, float, int]]


class SetQueue:
    """Waiting sets in ``key`` order; started and finished ones drop out lazily."""

    def __init__(self, key: OrderKey = SetState.order) -> None:
        self._items: list[SetState] = []
        self._key = key

    def add(self, state: SetState) -> None:
        """Insert a waiting set in its place."""
        bisect.insort(self._items, state, key=self._key)

    def resort(self) -> None:
        """Priorities changed: put every set back in its place."""
        self._items = sorted((s for s in self._items if s.waiting), key=self._key)

    def head(self) -> SetState | None:
        """The first waiting set."""
        dead = 0
        while dead < len(self._items) and not self._items[dead].waiting:
            dead += 1
        del self._items[:dead]
        return self._items[0] if self._items else None

    def __iter__(self) -> Iterator[SetState]:
        """The waiting sets in order (a snapshot: starting one while walking is safe)."""
        self._items = [s for s in self._items if s.waiting]
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)
