"""Run-time predictions from a lab's own history (Tsafrir, Etsion & Feitelson, TPDS 2007).

A *signature* says what kind of work a recipe set is, as an ordered tuple of
levels, finest first: each level is ``(name, key)``, and two sets are alike at a
level when their keys there are equal. The :class:`Predictor` learns from
finished runs and predicts a set's run time from the finest level it has seen
runs of: the mean of the last two (as Tsafrir et al.), never above the declared
``max_time``; with no history at any level, the declared ``max_time`` itself.

Runs that aborted or were cancelled say nothing of how long the work takes and
are not learned. A running set that outlives its prediction has it raised
(:func:`raised`): step by step, never below the time it has already run and
never above its ``max_time`` (EASY++). Predictions plan; they never kill: the
watchdog still ends a set at its declared ``max_time``.

Pure: no clock, no storage. The service feeds it rows from the store, the
simulator the runs that ended before "now".
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

Level = tuple[str, str]  # (the level's name, the key of the set at that level)
Signature = tuple[Level, ...]  # finest first
Outcome = Literal["completed", "aborted", "cancelled"]

DECLARED: Final = "declared max_time"  # the basis of a prediction without history
RECENT: Final = 2  # runs averaged for a prediction (Tsafrir et al.: the last two)
WINDOW: Final = 32  # runs kept per key for the median and the spread
# after a prediction is passed, it may grow by these seconds in turn, then by the last (a
# gradual correction); () raises straight to max_time, as EASY++ does (the core's default:
# it measured better, docs/scheduling.md § Predictions)
STEPS: Final = (60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 18000.0, 36000.0)


def swf_signature(user: int, executable: int, processors: int) -> Signature:
    """An SWF job's signature: (user, executable, processors) — fields 12, 14 and 5.

    An unknown field (-1) leaves out every level that needs it: a trace without users
    (a model's output) has no kinds, and its jobs are planned on their declared times.
    """
    if user < 0:
        return ()
    if executable < 0:
        return (("user, processors", f"{user}/{processors}"), ("user", str(user)))
    return (
        ("user, executable, processors", f"{user}/{executable}/{processors}"),
        ("user, executable", f"{user}/{executable}"),
        ("user", str(user)),
    )


def service_signature(
    source: str | None, tasks: Sequence[str], hosts: str, owner: str, group: str | None
) -> Signature:
    """A recipe set's signature in the service, finest first: its job source or clone chain
    (when it has one), its task list with host requirements, its owner's task list, its
    owner, its group."""
    work = f"{'|'.join(tasks)}#{hosts}"
    levels: list[Level] = []
    if source:
        levels.append(("job source", source))
    levels.append(("task list and hosts", work))
    levels.append(("owner and task list", f"{owner}:{work}"))
    levels.append(("owner", owner))
    if group:
        levels.append(("group", group))
    return tuple(levels)


@dataclass(frozen=True)
class PastRun:
    """A finished run of a set, as history keeps it."""

    signature: Signature
    seconds: float  # how long it ran
    outcome: Outcome
    ended_at: float


@dataclass(frozen=True)
class Prediction:
    """How long a set is expected to run, and on what grounds."""

    seconds: float
    spread: float  # the mean absolute deviation of the runs from their median (0: none)
    runs: int  # earlier runs at the level used (0: the declared max_time)
    median: float  # of the last runs at that level (up to WINDOW)
    basis: str  # the level's name, or DECLARED


class _Runs:
    """The recent run times of one key."""

    __slots__ = ("count", "times")

    def __init__(self) -> None:
        self.times: deque[float] = deque(maxlen=WINDOW)
        self.count = 0  # every run learned, not only the window

    def add(self, seconds: float) -> None:
        self.times.append(seconds)
        self.count += 1


class Predictor:
    """Learns run times per signature level and predicts from the finest level known."""

    def __init__(self, *, recent: int = RECENT, min_runs: int = 1) -> None:
        if recent < 1 or min_runs < 1:
            raise ValueError("recent and min_runs must be at least 1")
        self.recent = recent
        self.min_runs = min_runs
        self._runs: dict[Level, _Runs] = {}

    def learn(self, run: PastRun) -> None:
        """Take a finished run into account (aborted and cancelled ones are not its length)."""
        if run.outcome != "completed" or not run.seconds >= 0:
            return
        for level in run.signature:
            self._runs.setdefault(level, _Runs()).add(run.seconds)

    def learn_all(self, runs: Iterable[PastRun]) -> None:
        """Take many runs, oldest first."""
        for run in sorted(runs, key=lambda r: r.ended_at):
            self.learn(run)

    def predict(self, signature: Signature, max_time: float | None) -> Prediction | None:
        """The predicted run time of a set of this signature (None: no history, no max_time)."""
        for name, key in signature:
            found = self._runs.get((name, key))
            if found is None or found.count < self.min_runs:
                continue
            last = list(found.times)[-self.recent :]
            seconds = sum(last) / len(last)
            if max_time is not None:
                seconds = min(seconds, max_time)
            median = statistics.median(found.times)
            spread = sum(abs(t - median) for t in found.times) / len(found.times)
            return Prediction(seconds, spread, found.count, median, name)
        if max_time is None:
            return None
        return Prediction(max_time, 0.0, 0, max_time, DECLARED)


def raised(
    predicted: float,
    elapsed: float,
    max_time: float | None,
    steps: Sequence[float] = STEPS,
) -> float | None:
    """A running set's prediction once it has run ``elapsed`` seconds (EASY++).

    ``predicted`` is the set's first prediction (so the result depends on the
    elapsed time alone, not on when it is asked). While the set runs within it,
    the prediction stands. Once passed, it grows by ``steps`` in turn (the last
    step repeats) until it is above ``elapsed``; with no steps, it becomes
    ``max_time`` (None without one: it could end any moment, as a set that
    declares none). It is never above ``max_time`` — unless the set already ran
    longer (its watchdog's clock starts when it has its locks), when it is
    ``elapsed``: it could end any moment.
    """
    value = predicted
    if value <= elapsed:
        if not steps:
            if max_time is None:
                return None
            value = max_time
        index = 0
        while value <= elapsed and steps:
            value += steps[min(index, len(steps) - 1)]
            index += 1
    if max_time is not None:
        value = min(value, max_time)
    return max(value, elapsed)
