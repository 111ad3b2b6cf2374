"""Recipes of a set in lockstep: one ordered task list for the whole set.

teuthology runs a job's task list in order from one controller: task k has
done its work on every machine before task k+1 starts anywhere. Its reader
numbers each labq task with the step (the teuthology task) it came from; here
a task of step s starts only once every recipe has finished its tasks of the
steps before s. Tasks without a step are not held back.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Final

_TICK: Final = 0.1  # seconds between looks at the stop event while held


class StepGate:
    """Holds each task until every earlier step is finished on every recipe."""

    def __init__(self, steps: Mapping[int, Sequence[int | None]]) -> None:
        """``steps``: recipe id -> the step of each of its tasks, in order."""
        self._pending = {
            recipe: [s for s in recipe_steps if s is not None]
            for recipe, recipe_steps in steps.items()
        }
        self._left = Counter(s for pending in self._pending.values() for s in pending)
        self._changed = threading.Condition()

    def wait(self, step: int | None, stop: threading.Event) -> bool:
        """Block until ``step`` may start; False if ``stop`` was set first."""
        if step is None:
            return True
        with self._changed:
            while not stop.is_set():
                if self.may_start(step):
                    return True
                self._changed.wait(_TICK)
        return False

    def may_start(self, step: int) -> bool:
        """Every recipe has finished (or left) its tasks of the steps before ``step``."""
        return not any(left for s, left in self._left.items() if s < step)

    def done(self, recipe: int, step: int | None) -> None:
        """A task of ``step`` ended on ``recipe`` (whatever its result)."""
        if step is None:
            return
        with self._changed:
            self._pending[recipe].remove(step)
            self._left[step] -= 1
            self._changed.notify_all()

    def leave(self, recipe: int) -> None:
        """``recipe`` runs no more tasks: nobody waits for its remaining steps."""
        with self._changed:
            for step in self._pending.get(recipe, []):
                self._left[step] -= 1
            self._pending[recipe] = []
            self._changed.notify_all()
