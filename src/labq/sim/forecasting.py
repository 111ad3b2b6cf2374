"""How good labq's start forecasts are: record them during a simulation, compare with the starts.

:class:`ForecastRecorder` is labq's policy (the real core) that also notes, for each recipe
set, the start the core forecast for it when it was submitted and when it became the top
holder (the best-ranked set holding systems: the one whose reservation backfill respects).
:func:`accuracy` then sets them against the starts the simulation produced.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from labq.domain.locktable import Grant
from labq.domain.model import AccessPolicy
from labq.domain.states import RecipeState
from labq.scheduler.decisions import Decision
from labq.scheduler.entries import SchedulerConfig, SetSubmission
from labq.sim.policy import LabqPolicy, LabqPredictPolicy
from labq.sim.runner import access_policy
from labq.sim.scenario import Scenario
from labq.sim.world import World

SAMPLES = 300  # submission forecasts noted per run, at most about


class ForecastRecorder(LabqPolicy):
    """labq's core, unchanged, asked for its forecasts at the two moments that matter."""

    def __init__(
        self,
        config: SchedulerConfig,
        access: AccessPolicy,
        rng: random.Random | None = None,
        *,
        every: int = 1,
    ):
        super().__init__(config, access, rng)
        self.every = every  # note the submission forecast of one set in this many
        self.at_submission: dict[int, float] = {}  # set -> forecast start when submitted
        self.as_top: dict[int, float] = {}  # set -> forecast start when it became top holder
        self._top: int | None = None
        self._submitted = 0
        self.spent = 0.0  # seconds of wall time spent forecasting (benches leave it out)

    @classmethod
    def for_scenario(cls, scenario: Scenario, samples: int = SAMPLES) -> ForecastRecorder:
        """A recorder configured as ``labq sim`` would configure labq for this scenario,
        noting about ``samples`` submission forecasts (each costs a forecast of the queue)."""
        every = max(1, len(scenario.jobs) // samples)
        return cls(scenario.config.scheduler(), access_policy(scenario), every=every)

    def submit(self, sets: Sequence[SetSubmission], now: float) -> list[Decision]:
        """Submit, then note the sampled sets' forecast start (now, if it started at once)."""
        decisions = super().submit(sets, now)
        sampled = []
        for submission in sets:
            self._submitted += 1
            if self._submitted % self.every == 0:
                sampled.append(submission.id)
        waiting = [i for i in sampled if not self.sets[i].started]
        starts = self._forecast_starts(now) if waiting else {}
        for set_id in sampled:
            start = now if self.sets[set_id].started else starts.get(set_id)
            if start is not None and math.isfinite(start):
                self.at_submission[set_id] = start
        self._watch(now)
        return decisions

    def started(self, set_id: int, now: float) -> list[Decision]:
        decisions = super().started(set_id, now)
        self._watch(now)
        return decisions

    def finish(
        self, set_id: int, outcomes: Mapping[int, RecipeState], now: float
    ) -> list[Decision]:
        decisions = super().finish(set_id, outcomes, now)
        self._watch(now)
        return decisions

    def locks_held(self, set_id: int, grants: Sequence[Grant] | None, now: float) -> list[Decision]:
        decisions = super().locks_held(set_id, grants, now)
        self._watch(now)
        return decisions

    def consistency_pass(self, now: float) -> list[Decision]:
        decisions = super().consistency_pass(now)
        self._watch(now)
        return decisions

    def _watch(self, now: float) -> None:
        """If the top holder changed, note the new one's forecast start (once per set): its
        reservation, as ``forecasts`` gives it, without projecting the whole queue."""
        top = self._top_holder()
        changed, self._top = top != self._top, top
        if top is None or not changed or top in self.as_top:
            return
        reservation = self.reservation_of(self.sets[top])
        if reservation is not None and math.isfinite(reservation.start):
            self.as_top[top] = max(now, reservation.start)

    def _top_holder(self) -> int | None:
        best: int | None = None
        for ids in self.holders.values():
            for set_id in ids:
                if best is None or self.rank_of(self.sets[set_id]) < self.rank_of(self.sets[best]):
                    best = set_id
        return best

    def _forecast_starts(self, now: float) -> dict[int, float]:
        """The core's forecast start of every waiting set."""
        began = time.perf_counter()
        found = {set_id: f.start for set_id, f in self.forecasts(now).items()}
        self.spent += time.perf_counter() - began
        return found


class PredictingRecorder(ForecastRecorder, LabqPredictPolicy):
    """labq with run-time predictions (``labq-predict``), asked for its forecasts alike."""


@dataclass(frozen=True)
class Errors:
    """Absolute errors of one kind of forecast, in seconds."""

    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else math.nan

    @property
    def p90(self) -> float:
        if not self.values:
            return math.nan
        ordered = sorted(self.values)
        return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]  # nearest rank

    def text(self) -> str:
        """``median / p90 min (n)``."""
        if not self.values:
            return "- (0)"
        return f"{self.median / 60:.1f} / {self.p90 / 60:.1f} ({len(self.values)})"


@dataclass
class Accuracy:
    """Forecast starts against actual starts, by moment and by subset of sets."""

    submitted: dict[int, tuple[float, float, float]] = field(default_factory=dict)
    top: dict[int, tuple[float, float, float]] = field(default_factory=dict)

    def errors(self, moment: str, subset: str) -> Errors:
        """|forecast - start| at ``submitted`` or ``top``, over ``all`` sets or ``waited`` ones."""
        rows = self.submitted if moment == "submitted" else self.top
        return Errors(
            tuple(
                abs(forecast - start)
                for forecast, start, submitted in rows.values()
                if subset == "all" or start > submitted
            )
        )


def accuracy(recorder: ForecastRecorder, world: World) -> Accuracy:
    """Each recorded forecast with the set's real start (sets never started are left out)."""
    found = Accuracy()
    for moment, table in (("submitted", found.submitted), ("top", found.top)):
        source = recorder.at_submission if moment == "submitted" else recorder.as_top
        for set_id, forecast in source.items():
            run = world.sets.get(set_id)
            if run is not None and run.started_at is not None:
                table[set_id] = (forecast, run.started_at, run.submitted)
    return found
