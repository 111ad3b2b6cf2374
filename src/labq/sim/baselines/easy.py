"""EASY backfilling (Lifka 1995; Mu'alem and Feitelson 2001), the textbook batch policy.

The queue is ordered by priority, then first come, first served. Sets at its
head start as soon as they fit in free systems. When the head does not fit it
gets a reservation: the *shadow time*, the soonest enough of its systems will
be free if every running set ends at its declared maximum time. A later set may
then start at once (backfill) if it fits in the free systems and either ends
before the shadow time or leaves the head enough systems at that time. Nobody
holds systems; only the head is protected.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from labq.domain.model import AccessPolicy
from labq.domain.states import Condition, RecipeState
from labq.scheduler.decisions import Decision
from labq.scheduler.entries import SchedulerConfig, SetSubmission
from labq.sim.baselines.base import Baseline
from labq.sim.baselines.books import SetState


@dataclass
class Reservation:
    """Where and when the head of the queue will start, and what it may use then."""

    head: SetState
    lab: str
    shadow: float
    available: set[str]  # systems of the lab free by the shadow time, not promised away


class Easy(Baseline):
    """Start the head when it fits; backfill behind it without delaying it."""

    name = "easy"
    polls = False

    def __init__(self, config: SchedulerConfig, access: AccessPolicy, rng: random.Random):
        super().__init__(config, access, rng)
        self._busy_until: dict[str, float] = {}  # running system -> its set's latest end

    def schedule(self) -> None:
        """Start sets from the head while they fit, then backfill behind the first that does not."""
        head: SetState | None = None
        reservation: Reservation | None = None
        for state in self.queue:
            free = self.free_count()
            if free == 0:
                return
            if head is None:
                if not self._start_now(state, None):
                    head = state
                    reservation = self._reserve(state)
                continue
            if state.size <= free:
                self._start_now(state, reservation)

    def _start_now(self, state: SetState, reservation: Reservation | None) -> bool:
        """Start the set on free systems if it fits and does not delay the reservation."""
        for lab in self.possible_labs(state):
            placement = self.fit_whole(state, lab, self.free[lab])
            if placement is None:
                continue
            if reservation is not None and lab == reservation.lab:
                end = self.now + state.max_time if state.max_time is not None else math.inf
                if end > reservation.shadow:
                    left = reservation.available - set(placement.values())
                    if self.fit_whole(reservation.head, lab, left) is None:
                        continue  # it would still hold systems the head needs at its start
                    reservation.available = left
            self.place(state, lab, placement)
            self.start(state)
            return True
        return False

    def _reserve(self, head: SetState) -> Reservation | None:
        """The lab where the head can start soonest, and when."""
        best: Reservation | None = None
        for lab in self.possible_labs(head):
            found = self._shadow(head, lab)
            if found is not None and (best is None or found.shadow < best.shadow):
                best = found
        return best

    def _shadow(self, head: SetState, lab: str) -> Reservation | None:
        """The soonest time the head fits in ``lab`` as running sets end."""
        free_at: dict[str, float] = {}
        for cid in set(head.klass.values()):
            for fqdn in self._viable[cid].get(lab, ()):
                if self.systems[fqdn].condition is Condition.AUTOMATED:
                    free_at[fqdn] = max(self.now, self._busy_until.get(fqdn, self.now))
        times = sorted(free_at.values())
        if len(set(head.klass.values())) == 1:  # interchangeable recipes: count systems
            found = times[head.size - 1] if len(times) >= head.size else None
        else:
            found = self._search(head, lab, free_at, sorted(set(times)))
        if found is None:
            return None
        return Reservation(head, lab, found, {f for f, t in free_at.items() if t <= found})

    def _search(
        self, head: SetState, lab: str, free_at: dict[str, float], times: list[float]
    ) -> float | None:
        """The first of ``times`` by which the systems then free can place the head."""
        low, high = 0, len(times) - 1
        found: float | None = None
        while low <= high:
            middle = (low + high) // 2
            by_then = {f for f, t in free_at.items() if t <= times[middle]}
            if self.fit_whole(head, lab, by_then) is not None:
                found, high = times[middle], middle - 1
            else:
                low = middle + 1
        return found

    def start(self, state: SetState) -> None:
        """Remember when the set's systems will be free: its start plus its declared time.

        A set with no declared time could end any moment, so it counts as free
        now: the shadow time is then early, which only makes backfill stricter.
        """
        super().start(state)
        end = self.now + state.max_time if state.max_time is not None else self.now
        for fqdn in state.placed.values():
            self._busy_until[fqdn] = end

    def finish(
        self, set_id: int, outcomes: Mapping[int, RecipeState], now: float
    ) -> list[Decision]:
        """The set's systems are free: forget their expected end."""
        for fqdn in self.sets[set_id].placed.values():
            self._busy_until.pop(fqdn, None)
        return super().finish(set_id, outcomes, now)


class EasyIdeal(Easy):
    """EASY told every set's real run time instead of its declared limit: the ideal that
    predictions aim at (the watchdog still kills at the declared limit)."""

    name = "easy-ideal"
    predicts = "actual"

    def submit(self, sets: Sequence[SetSubmission], now: float) -> list[Decision]:
        """Each set as if its declared limit were its real run time."""
        told = [dataclasses.replace(s, max_time=s.predicted or s.max_time) for s in sets]
        return super().submit(told, now)
