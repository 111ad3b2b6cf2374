"""The core as others may see it: read-only mappings and questions, no way to change it.

The service, the simulator and the explorer read the core's state through
:class:`SchedulerView` (the :class:`~labq.scheduler.core.Scheduler` is one);
only the core's events change it.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Set
from typing import Protocol

from labq.domain.model import AccessPolicy
from labq.scheduler.entries import (
    RecipeEntry,
    SchedulerConfig,
    SetEntry,
    SystemEntry,
    ViabilityClass,
)
from labq.scheduler.forecast import Forecast
from labq.scheduler.order import Rank
from labq.scheduler.reservation import Reservation


class ClassesView(Protocol):
    """The viability classes in use and which systems meet each."""

    @property
    def classes(self) -> Mapping[str, ViabilityClass]:
        """Every class by its key."""

    @property
    def systems_of(self) -> Mapping[str, Set[str]]:
        """Per class, the systems that meet it."""

    @property
    def classes_of(self) -> Mapping[str, Set[str]]:
        """Per system, the classes it meets."""


class SchedulerView(Protocol):
    """What the core knows now, to read."""

    @property
    def config(self) -> SchedulerConfig:
        """The knobs of the policy."""

    @property
    def policy(self) -> AccessPolicy:
        """Who may use which pool, up to which priority."""

    @property
    def now(self) -> float:
        """The time of the last event."""

    @property
    def systems(self) -> Mapping[str, SystemEntry]:
        """Every system, by name."""

    @property
    def sets(self) -> Mapping[int, SetEntry]:
        """Every set the core heard of, by id (ended ones too)."""

    @property
    def recipes(self) -> Mapping[int, RecipeEntry]:
        """Every recipe of those sets, by id."""

    @property
    def free(self) -> Mapping[str, Set[str]]:
        """Per lab, the idle systems (every lab with systems has an entry)."""

    @property
    def holders(self) -> Mapping[str, Set[int]]:
        """Per lab, the sets holding systems there without having started."""

    @property
    def paused(self) -> Set[str]:
        """The labs whose queue is paused."""

    @property
    def index(self) -> ClassesView:
        """The viability classes and their systems."""

    def rank_of(self, entry: SetEntry) -> Rank:
        """The set's global hold rank now."""

    def waits_for(self, entry: SetEntry) -> str | None:
        """What keeps a waiting set from running now, in plain words (None: only its turn)."""

    def could_run_in(self, entry: SetEntry, lab: str) -> bool:
        """Whether the systems ``lab`` may use now could run the whole set once free."""

    def reservation_of(self, entry: SetEntry) -> Reservation | None:
        """A holder's reservation in its lab now (None for a set that holds nothing)."""

    def slot_free(self, lab: str) -> bool:
        """Whether a set may start in ``lab`` now (not paused, below the running limits)."""

    def lock_wait(self, entry: SetEntry, lab: str) -> str | None:
        """Why the set would surely wait for a lock if it started in ``lab`` now, or None."""

    def kept_for_locks(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The sets due first after their lock was let go (by id), and those in line for a
        lock (in line order)."""

    def busy_until(self, fqdn: str, now: float) -> float | None:
        """When a system running a started set is declared free (None: it runs none)."""

    def forecasts(self, now: float) -> Mapping[int, Forecast]:
        """Each waiting and running set's forecast start and end (scheduler/forecast.py)."""

    def candidates(
        self, system: SystemEntry, now: float
    ) -> Generator[tuple[SetEntry, str], None, None]:
        """Waiting sets that may use ``system``, best first by its order at ``now`` (with the
        class through which each would take it); close the walk when done."""
