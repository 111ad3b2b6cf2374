"""Beaker's legacy batch loop (seed 000), the one event-driven scheduling replaced.

Every ``poll_every`` seconds the loop walks the queued recipes by (priority,
id) — nominal priority, not effective — and gives each one, on its own, any
free system it matches. A recipe set keeps whatever its recipes got (all in
the lab of its first) and starts once every recipe has a system. New jobs are
processed as they arrive, between passes, and may take a free system straight
away. Hence the seed's two races:

- **ABBA deadlock**: two multi-host sets that need the same systems can each
  get one, and each then waits for the other's forever — nothing takes a held
  system back.
- **Queue jumping**: a rare system freed between passes goes to whoever the
  loop reaches first — a job arriving meanwhile takes it before the pass gets
  to the higher-priority recipe that was waiting for it.
"""

from __future__ import annotations

from collections.abc import Sequence

from labq.sim.baselines.base import Baseline
from labq.sim.baselines.books import SetState


class BeakerBatch(Baseline):
    """Recipe by recipe, in (priority, id) order, on a timer."""

    name = "beaker-batch"
    polls = True

    def queue_order(self, state: SetState) -> tuple[int, float, int]:
        """(priority, recipe id): recipe ids follow set ids, so the set's id stands for them."""
        return (-int(state.priority), float(state.id), 0)

    def on_submit(self, states: Sequence[SetState]) -> None:
        """The new-job stage runs mid-pass: a new recipe may take any free system it matches."""
        for state in states:
            self._grab(state)

    def poll(self) -> None:
        """One pass over the queued recipes."""
        for state in self.queue:
            if self.free_count() == 0:
                return
            self._grab(state)

    def _grab(self, state: SetState) -> None:
        """Give each unplaced recipe of the set a free system of its own, if one matches."""
        for recipe in sorted(state.unplaced(), key=lambda r: r.id):
            labs = [state.lab] if state.lab is not None else self.possible_labs(state)
            for lab in labs:
                options = self.candidates(state.klass[recipe.id], lab, self.free[lab])
                if options:
                    self.place(state, lab, {recipe.id: options[0]})
                    break
        if len(state.placed) == state.size:
            self.start(state)
