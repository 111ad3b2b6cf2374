"""Deliberately broken rules for the explorer to catch, swapped into the core inside a test.

No flag in the core: a subclass of one of its parts replaces that part on a
fresh :class:`~labq.scheduler.core.Scheduler`.
"""

from __future__ import annotations

from collections.abc import Mapping

from labq.domain.model import AccessPolicy
from labq.scheduler.backfill import Backfill, Protected
from labq.scheduler.core import Scheduler
from labq.scheduler.entries import SchedulerConfig, SetEntry


class NoReservation(Backfill):
    """Backfill without the reservation check: any set that fits starts, whatever it delays."""

    def delays(self, entry: SetEntry, lab: str, placement: Mapping[int, str]) -> bool:
        return False

    def _delays_any(
        self, protected: Protected, entry: SetEntry, placement: Mapping[int, str]
    ) -> bool:
        return False


def no_reservation(config: SchedulerConfig, access: AccessPolicy) -> Scheduler:
    """The core with :class:`NoReservation` in place of its backfill."""
    core = Scheduler(config, access)
    core.backfill = NoReservation(
        core.books, core.placer, core.profile, core.index, core.policy, core.config
    )
    core.holds.backfill = core.backfill
    return core
