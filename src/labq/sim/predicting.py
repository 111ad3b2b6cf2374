"""What the simulated world tells a policy to expect of a set's run time.

A policy says what it is told (its ``predicts`` attribute):

- ``"learned"``: labq's prediction (:mod:`labq.domain.prediction`), learned online from
  the sets that ended before now — never from a set still running or to come;
- ``"actual"``: the set's real run time (the ideal: EASY told the truth);
- nothing (the default): no prediction, the policy plans with declared ``max_time``.

A set's signature comes from its scenario job (an SWF trace gives (user,
executable, processors)); a job without one is alike only to itself by name.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Final

from labq.domain.prediction import Outcome, PastRun, Predictor, Signature
from labq.domain.states import RecipeState
from labq.scheduler.view import SchedulerView
from labq.sim.runs import SetRun

LEARNED: Final = "learned"
ACTUAL: Final = "actual"
MODES: Final = (LEARNED, ACTUAL)


class Foresight:
    """Fills each set's ``predicted`` as it is submitted, and learns from those that end."""

    def __init__(self, mode: str, predictor: Predictor | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown prediction mode {mode!r}")
        self.mode = mode
        self.predictor = predictor or Predictor()
        self.made: dict[int, float | None] = {}  # set -> what it was told at submission

    def predict(self, run: SetRun, install_time: float) -> None:
        """Set ``run.predicted`` before the policy hears of the set."""
        if self.mode == ACTUAL:
            work = max((r.duration for r in run.recipes), default=0.0) + install_time
            seconds: float | None = work
            if run.max_time is not None:
                seconds = min(work, run.max_time + install_time)
        else:
            found = self.predictor.predict(signature_of(run), run.max_time)
            seconds = None if found is None else found.seconds
        run.predicted = seconds
        self.made[run.id] = seconds

    def learn(self, run: SetRun, outcomes: dict[int, RecipeState]) -> None:
        """A started set ended: how long it ran is learned if it completed."""
        if self.mode != LEARNED or run.started_at is None or run.finished_at is None:
            return
        states = set(outcomes.values())
        outcome: Outcome = "completed"
        if RecipeState.ABORTED in states:
            outcome = "aborted"
        elif RecipeState.CANCELLED in states:
            outcome = "cancelled"
        seconds = run.finished_at - run.started_at
        self.predictor.learn(PastRun(signature_of(run), seconds, outcome, run.finished_at))


def signature_of(run: SetRun) -> Signature:
    """The set's signature: its job's (an SWF trace's may be empty: no kinds known)."""
    return run.signature


class ForecastLog:
    """The start each set was forecast at submission and when it first became its lab's top
    holder (the core's :meth:`~labq.scheduler.core.Scheduler.forecasts`), to set against the
    start it got: how good ``labq queue``'s forecasts are on a trace."""

    def __init__(self) -> None:
        self.at_submission: dict[int, float] = {}
        self.at_top: dict[int, float] = {}

    def submitted(self, core: SchedulerView, set_ids: Iterable[int], now: float) -> None:
        """The sets were just submitted (and maybe started): what the core forecasts."""
        found = core.forecasts(now)
        for i in set_ids:
            if i in found:
                self.at_submission[i] = found[i].start

    def decided(self, core: SchedulerView, now: float) -> None:
        """After an event: a set that became its lab's top holder gets its forecast taken."""
        tops = [
            max(ids, key=lambda h: core.rank_of(core.sets[h]))
            for ids in core.holders.values()
            if ids
        ]
        new = [t for t in tops if t not in self.at_top]
        if new:
            found = core.forecasts(now)
            for t in new:
                self.at_top[t] = found[t].start if t in found else math.inf

    def errors(self, starts: Mapping[int, float], when: str) -> list[float]:
        """Absolute errors in seconds of the forecasts made ``when`` ("submission" or "top")."""
        made = self.at_submission if when == "submission" else self.at_top
        return [abs(made[i] - starts[i]) for i in made if i in starts and made[i] < math.inf]
