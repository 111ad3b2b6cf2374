"""Teuthology's dispatcher (seed 001, GSoC 2020): one dispatcher, strict queue order.

The dispatcher takes the next job in priority order (first come, first served
among equals), locks machines for it as they become free and holds them, and
hands the job on to run once it has them all. Until then nothing behind it
runs: head-of-line blocking, no backfill. Big jobs are not starved and priority
is kept, at the price of machines that sit locked and idle.
"""

from __future__ import annotations

import random

from labq.domain.model import AccessPolicy
from labq.scheduler.entries import SchedulerConfig
from labq.sim.baselines.base import Baseline
from labq.sim.baselines.books import SetState


class TeuthologyDispatcher(Baseline):
    """One job at a time: the head of the queue gathers its machines, then the next."""

    name = "teuthology-dispatcher"
    polls = False

    def __init__(self, config: SchedulerConfig, access: AccessPolicy, rng: random.Random):
        super().__init__(config, access, rng)
        self.current: SetState | None = None  # the job the dispatcher took from the queue

    def schedule(self) -> None:
        """Lock what the current job can have; start it when complete, then take the next."""
        while True:
            if self.current is None or not self.current.waiting:
                # a job once taken keeps its turn, even if a more urgent one arrives
                self.current = self.queue.head()
            state = self.current
            if state is None:
                return
            if state.lab is not None and state.lab not in self.possible_labs(state):
                for recipe_id in list(state.placed):  # its lab lost systems for good
                    self.release(state, recipe_id, f"lab {state.lab} can no longer run it")
            lab = state.lab or self._choose_lab(state)
            if lab is None:
                return  # no lab can run it now; the consistency pass will refuse it
            self.gather(state, lab)
            if len(state.placed) < state.size:
                return
            self.start(state)

    def _choose_lab(self, state: SetState) -> str | None:
        """Of the labs that could run it, the one with the most usable free machines now."""
        best: tuple[int, str] | None = None
        for lab in self.possible_labs(state):
            usable = len(self.fit(state, lab, self.free[lab]))
            if best is None or usable > best[0]:
                best = (usable, lab)
        return best[1] if best else None
