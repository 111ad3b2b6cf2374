"""Teuthology's legacy workers (seed 001): many workers race for jobs and machines.

Each idle worker takes the highest-priority job it can lock *every* machine for
right now and skips the rest; machines are locked all at once or not at all,
and nobody holds machines for a job that cannot have them yet. So a job that
needs many machines waits until that many happen to be free at the same poll,
which a steady stream of small jobs never allows: "it's very likely that our job
isn't able to start execution at all".
"""

from __future__ import annotations

import random

from labq.domain.model import AccessPolicy
from labq.scheduler.entries import SchedulerConfig
from labq.sim.baselines.base import Baseline
from labq.sim.baselines.books import Placement, SetState


class TeuthologyWorkers(Baseline):
    """Workers poll the priority queue; a job runs when its worker locks all its machines."""

    name = "teuthology-workers"
    polls = True

    def __init__(
        self,
        config: SchedulerConfig,
        access: AccessPolicy,
        rng: random.Random,
        workers: int | None = None,
    ):
        super().__init__(config, access, rng)
        self.workers = workers  # None: one worker per system, so workers never run short

    def poll(self) -> None:
        """Each idle worker takes the first job in priority order whose machines it can lock."""
        idle = (self.workers if self.workers is not None else len(self.systems)) - self.running
        for state in self.queue:
            free = self.free_count()
            if idle <= 0 or free == 0:
                return
            if state.size > free:
                continue  # cannot lock them all: the worker looks at the next job
            locked = self._lock_all(state)
            if locked is not None:
                lab, placement = locked
                self.place(state, lab, placement)
                self.start(state)
                idle -= 1

    def _lock_all(self, state: SetState) -> tuple[str, Placement] | None:
        """All the job's machines in one lab, or nothing (Teuthology's lock_many).

        Which free machines a worker gets is a race with the other workers: the
        free machines are tried in random order.
        """
        for lab in self.possible_labs(state):
            placement = self.fit_whole(state, lab, self.free[lab], shuffle=True)
            if placement is not None:
                return lab, placement
        return None
