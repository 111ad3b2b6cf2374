"""The policies ``labq sim`` compares, behind one small interface."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from labq.domain.distro import DistroTree
from labq.domain.locktable import Grant
from labq.domain.model import AccessPolicy
from labq.domain.priority import Priority
from labq.domain.states import Condition, RecipeState
from labq.scheduler.core import Scheduler
from labq.scheduler.decisions import Decision
from labq.scheduler.entries import SchedulerConfig, SetSubmission, SystemEntry


class Policy(Protocol):
    """Events in, decisions out: what the simulator drives.

    ``polls`` policies (the legacy batch loops and workers) also get ``tick``
    every ``poll_every`` seconds; event-driven ones get nothing from a timer but
    the consistency pass.
    """

    name: str
    polls: bool

    def add_system(self, system: SystemEntry, now: float) -> list[Decision]: ...
    def change_condition(self, fqdn: str, condition: Condition, now: float) -> list[Decision]: ...
    def submit(self, sets: Sequence[SetSubmission], now: float) -> list[Decision]: ...
    def started(self, set_id: int, now: float) -> list[Decision]: ...
    def finish(
        self, set_id: int, outcomes: Mapping[int, RecipeState], now: float
    ) -> list[Decision]: ...
    def cancel(self, set_ids: Iterable[int], now: float) -> list[Decision]: ...
    def change_priority(
        self, set_ids: Iterable[int], priority: Priority, now: float
    ) -> list[Decision]: ...
    def locks_held(
        self, set_id: int, grants: Sequence[Grant] | None, now: float
    ) -> list[Decision]: ...
    def hold_system(self, fqdn: str, person: str, now: float) -> list[Decision]: ...
    def release_system(self, fqdn: str, now: float) -> list[Decision]: ...
    def pause_lab(self, lab: str, now: float) -> list[Decision]: ...
    def resume_lab(self, lab: str, now: float) -> list[Decision]: ...
    def set_trees(self, lab: str, trees: Iterable[DistroTree], now: float) -> list[Decision]: ...
    def consistency_pass(self, now: float) -> list[Decision]: ...
    def tick(self, now: float) -> list[Decision]: ...


class LabqPolicy(Scheduler):
    """The real core, as is: labq's policy."""

    name = "labq"
    polls = False

    def __init__(
        self, config: SchedulerConfig, access: AccessPolicy, rng: random.Random | None = None
    ):
        super().__init__(config, access)  # the core needs no randomness

    def tick(self, now: float) -> list[Decision]:
        """labq is event-driven: nothing happens on a timer but the consistency pass."""
        return []


class LabqFifoPolicy(LabqPolicy):
    """The real core with the predictive weight off: first come, first served within a
    priority, as Ganeti's queue was before seed 004 (the comparison for the predictive queue).
    """

    name = "labq-fifo"

    def __init__(
        self, config: SchedulerConfig, access: AccessPolicy, rng: random.Random | None = None
    ):
        super().__init__(dataclasses.replace(config, predictive=False), access, rng)


class LabqPredictPolicy(LabqPolicy):
    """The real core backfilling on run times it learned from the sets that ended before
    (``backfill_on_predictions``; sim/predicting.py): labq with predictions on."""

    name = "labq-predict"
    predicts = "learned"

    def __init__(
        self, config: SchedulerConfig, access: AccessPolicy, rng: random.Random | None = None
    ):
        super().__init__(dataclasses.replace(config, backfill_on_predictions=True), access, rng)


class LabqIdealPolicy(LabqPredictPolicy):
    """The real core told every set's real run time: what perfect predictions would give."""

    name = "labq-ideal"
    predicts = "actual"


PolicyFactory = Callable[[SchedulerConfig, AccessPolicy, random.Random], Policy]


def registry() -> dict[str, PolicyFactory]:
    """Every policy by name."""
    from labq.sim.baselines import BASELINES

    return {
        "labq": LabqPolicy,
        "labq-fifo": LabqFifoPolicy,
        "labq-predict": LabqPredictPolicy,
        "labq-ideal": LabqIdealPolicy,
        **BASELINES,
    }
