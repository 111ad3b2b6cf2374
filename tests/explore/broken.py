"""Deliberately broken rules for the explorer to catch, swapped into the core inside a test.

No flag in the core: a subclass of one of its parts replaces that part in a
subclass of :class:`~labq.scheduler.core.Scheduler` (its ``*_class`` attributes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet

from labq.domain.model import AccessPolicy
from labq.domain.priority import Priority
from labq.domain.states import RecipeState
from labq.scheduler import decisions as d
from labq.scheduler.backfill import Backfill, Protected
from labq.scheduler.core import Scheduler
from labq.scheduler.entries import SchedulerConfig, SetEntry
from labq.scheduler.holds import Holds
from labq.scheduler.lockline import Keeper
from labq.scheduler.placement import Placer
from labq.scheduler.weights import Weights


class NoReservation(Backfill):
    """Backfill without the reservation check: any set that fits starts, whatever it delays."""

    def delays(self, entry: SetEntry, lab: str, placement: Mapping[int, str]) -> bool:
        return False

    def _delays_any(
        self, protected: Protected, entry: SetEntry, placement: Mapping[int, str]
    ) -> bool:
        return False


class _NoReservationCore(Scheduler):
    backfill_class = NoReservation


def no_reservation(config: SchedulerConfig, access: AccessPolicy) -> Scheduler:
    """The core with :class:`NoReservation` in place of its backfill."""
    return _NoReservationCore(config, access)


class PerPoolHolds(Holds):
    """Holders ranked per pool, as Beaker's were: a holder may take a system another holder
    holds only if it has the higher effective priority on that system's pools. Two groups
    with opposite caps on two pools then each hold what the other needs (ABBA)."""

    def _complete_one(self, lab: str) -> SetEntry | None:
        books = self.books
        ranked = sorted(books.holders[lab], key=lambda h: books.rank_of(books.sets[h]))
        for holder_id in reversed(ranked):
            holder = books.sets[holder_id]
            takeable = {
                fqdn
                for other_id in ranked
                if other_id != holder_id
                for fqdn in books.sets[other_id].held
                if self._outranks(holder, books.sets[other_id], fqdn)
            }
            pool = books.available(lab) | holder.held | takeable
            placement = self.placer.place(holder, lab, pool, every=True)
            if len(placement) < holder.width or self.backfill.delays(holder, lab, placement):
                continue
            self._rearrange(holder, lab, placement)
            return holder
        return None

    def _outranks(self, entry: SetEntry, other: SetEntry, fqdn: str) -> bool:
        pools = self.books.systems[fqdn].pools

        def on_pool(e: SetEntry) -> tuple[int, float, int]:
            cap = self.placer.policy.maximum(pools, e.group) or Priority.LOW
            return (int(min(e.priority, cap)), -e.submitted, -e.id)

        return on_pool(entry) > on_pool(other)


class _PerPoolHoldsCore(Scheduler):
    holds_class = PerPoolHolds


def per_pool_holds(config: SchedulerConfig, access: AccessPolicy) -> Scheduler:
    """The core with :class:`PerPoolHolds` in place of its holds."""
    return _PerPoolHoldsCore(config, access)


class NoCaps(AccessPolicy):
    """Pool access without the caps of seed 002: a group that may use a pool gets its
    nominal priority there, whatever the rules cap it at."""

    def maximum(self, pools: Iterable[str], group: str | None) -> Priority | None:
        best = super().maximum(pools, group)
        return None if best is None else Priority.URGENT


def no_caps(config: SchedulerConfig, access: AccessPolicy) -> Scheduler:
    """The core with an access policy that forgets the caps."""
    policy = NoCaps()
    policy.rules = access.rules
    return Scheduler(config, policy)


class Forgetful(Scheduler):
    """A core whose retries forget where the set aborted."""

    def finish(
        self, set_id: int, outcomes: Mapping[int, RecipeState], now: float
    ) -> list[d.Decision]:
        out = super().finish(set_id, outcomes, now)
        return [d.Retry(x.set, x.attempt, {}) if isinstance(x, d.Retry) else x for x in out]


def forgetful(config: SchedulerConfig, access: AccessPolicy) -> Scheduler:
    """The core with retries that may run where they aborted."""
    return Forgetful(config, access)


class FlatWeights(Weights):
    """Weights that ignore the running sets' locks (spv is the base)."""

    def spv_of(self, entry: SetEntry) -> float:
        if self.keeper.weighs_nothing(entry):
            return 0.0
        return self.config.spv_base


class _FlatWeightsCore(Scheduler):
    weights_class = FlatWeights


def flat_weights(config: SchedulerConfig, access: AccessPolicy) -> Scheduler:
    """The core with :class:`FlatWeights`."""
    return _FlatWeightsCore(config, access)


class StaleDue(Keeper):
    """The keeper as it was before the explorer's finding: a set due once stays due, even
    after another set takes its lock again (a whole-lab set then weighed 0 while kept)."""

    def taken_again(self) -> list[int]:
        return []


class _StaleDueCore(Scheduler):
    keeper_class = StaleDue


def stale_due(config: SchedulerConfig, access: AccessPolicy) -> Scheduler:
    """The core with :class:`StaleDue` as its keeper."""
    return _StaleDueCore(config, access)


class VmsFirstPlacer(Placer):
    """Takes VM slots before machines (a VM made while a machine idles)."""

    def _physical_first(
        self, pool: AbstractSet[str], count: int, avoid: AbstractSet[str]
    ) -> list[str]:
        return sorted(pool, key=lambda f: (f not in self.virtual, f))[:count]


class _VmsFirstCore(Scheduler):
    def __init__(self, config: SchedulerConfig, access: AccessPolicy) -> None:
        super().__init__(config, access)
        self._placer.__class__ = VmsFirstPlacer  # the parts share this one placer


def vms_first(config: SchedulerConfig, access: AccessPolicy) -> Scheduler:
    """The core with VM slots preferred to machines."""
    return _VmsFirstCore(config, access)
