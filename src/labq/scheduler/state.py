"""The core's parts, wired together once, and what others may read of them.

:class:`CoreState` builds the parts (see :mod:`labq.scheduler.core` for what
each owns) and answers the questions of
:class:`~labq.scheduler.view.SchedulerView` — read-only mappings and queries;
the :class:`~labq.scheduler.core.Scheduler` adds the events that change them.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Set
from typing import ClassVar

from labq.domain.model import AccessPolicy
from labq.scheduler.admission import Admission
from labq.scheduler.backfill import Backfill
from labq.scheduler.books import Books
from labq.scheduler.choice import Chooser
from labq.scheduler.distros import Trees
from labq.scheduler.entries import RecipeEntry, SchedulerConfig, SetEntry, SystemEntry
from labq.scheduler.forecast import Forecast, forecasts
from labq.scheduler.freshness import Freshness
from labq.scheduler.holds import Holds
from labq.scheduler.index import ClassIndex
from labq.scheduler.lockline import Keeper
from labq.scheduler.order import Rank
from labq.scheduler.placement import Placer
from labq.scheduler.planning import Planner
from labq.scheduler.predictive import RunningLocks
from labq.scheduler.profile import Profile
from labq.scheduler.reservation import Reservation
from labq.scheduler.roster import Roster
from labq.scheduler.view import ClassesView
from labq.scheduler.waitlist import Waitlist
from labq.scheduler.weights import Weights


class CoreState:
    """The parts of the core, each owning its state, and the read-only view of them."""

    # the parts' classes (the explorer's tests swap in deliberately broken ones)
    backfill_class: ClassVar[type[Backfill]] = Backfill
    holds_class: ClassVar[type[Holds]] = Holds
    keeper_class: ClassVar[type[Keeper]] = Keeper
    weights_class: ClassVar[type[Weights]] = Weights

    def __init__(self, config: SchedulerConfig | None = None, policy: AccessPolicy | None = None):
        config = self._config = config or SchedulerConfig()
        policy = self._policy = policy or AccessPolicy()
        fresh = self._fresh = Freshness()
        waitlist = self._waitlist = Waitlist(fresh)
        books = self._books = Books(config, fresh, waitlist)
        index = self._index = ClassIndex()
        placer = self._placer = Placer(
            index, books.systems, policy, waitlist.demand, fresh, books.virtual
        )
        profile = self._profile = Profile(fresh)
        backfill = self._backfill = self.backfill_class(
            books, placer, profile, index, policy, config, waitlist, fresh
        )
        admission = self._admission = Admission(config)
        holds = self._holds = self.holds_class(books, placer, backfill, admission, fresh)
        running_locks = RunningLocks(config.lock_levels)
        keeper = self._keeper = self.keeper_class(
            books.sets, books.rank_of, running_locks, enabled=config.predictive
        )
        weights = self._weights = self.weights_class(
            config, books, waitlist, holds, admission, running_locks, keeper, fresh
        )
        self._roster = Roster(books, index, waitlist, weights, holds, profile)
        self._chooser = Chooser(books, placer, admission, keeper, backfill, holds)
        self._planner = Planner(books, profile, waitlist, config)
        self._trees = Trees(books, index, placer, fresh)

    # --- what others read ------------------------------------------------------------

    @property
    def config(self) -> SchedulerConfig:
        """The knobs of the policy."""
        return self._config

    @property
    def policy(self) -> AccessPolicy:
        """Who may use which pool, up to which priority."""
        return self._policy

    @property
    def now(self) -> float:
        """The time of the event being handled."""
        return self._books.now

    @property
    def systems(self) -> Mapping[str, SystemEntry]:
        """Every system, by name."""
        return self._books.systems

    @property
    def sets(self) -> Mapping[int, SetEntry]:
        """Every set the core heard of, by id (ended ones too)."""
        return self._books.sets

    @property
    def recipes(self) -> Mapping[int, RecipeEntry]:
        """Every recipe of those sets, by id."""
        return self._books.recipes

    @property
    def free(self) -> Mapping[str, Set[str]]:
        """Per lab, the systems holding no recipe (not removed)."""
        return self._books.free

    @property
    def holders(self) -> Mapping[str, Set[int]]:
        """Per lab, the sets holding systems there without having started."""
        return self._books.holders

    @property
    def paused(self) -> Set[str]:
        """The labs whose queue is paused."""
        return self._admission.paused

    @property
    def index(self) -> ClassesView:
        """The viability classes and their systems."""
        return self._index

    def rank_of(self, entry: SetEntry) -> Rank:
        """The set's global hold rank now."""
        return self._books.rank_of(entry)

    def waits_for(self, entry: SetEntry) -> str | None:
        """What keeps a waiting set from running now, in plain words (None: only its turn)."""
        if entry.blocked is not None:
            return entry.blocked
        if entry.throttle is not None:
            return entry.throttle
        if entry.lab is not None:
            return self._admission.slot_reason(entry.lab)
        # not placed yet: say why only when every lab that could run it is closed to it
        reasons = [
            self._keeper.reason(entry, lab) or self._admission.slot_reason(lab)
            for lab in sorted(self._books.free)
            if self.could_run_in(entry, lab)
        ]
        if reasons and all(reasons):
            return "; ".join(dict.fromkeys(r for r in reasons if r))
        return None

    def could_run_in(self, entry: SetEntry, lab: str) -> bool:
        """Whether the systems ``lab`` may use now could run the whole set once free."""
        return self._chooser.could_run_in(entry, lab)

    def reservation_of(self, entry: SetEntry) -> Reservation | None:
        """A holder's reservation in its lab now (None for a set that holds nothing)."""
        if entry.lab is None or entry.id not in self._books.holders.get(entry.lab, ()):
            return None
        return self._backfill.reservation(entry, entry.lab)

    def slot_free(self, lab: str) -> bool:
        """Whether a set may start in ``lab`` now (not paused, below the running limits)."""
        return self._admission.slot_free(lab)

    def lock_wait(self, entry: SetEntry, lab: str) -> str | None:
        """Why the set would surely wait for a lock if it started in ``lab`` now, or None."""
        return self._keeper.reason(entry, lab)

    def kept_for_locks(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The sets due first after their lock was let go (by id), and those in line for a
        lock (in line order)."""
        return tuple(sorted(self._keeper.due)), tuple(self._keeper.line.kept)

    def busy_until(self, fqdn: str, now: float) -> float | None:
        """When a system running a started set is declared free (None: it runs none)."""
        return self._profile.free_at(fqdn, now) if self._profile.busy(fqdn) else None

    def forecasts(self, now: float) -> Mapping[int, Forecast]:
        """Each waiting and running set's forecast start and end (scheduler/forecast.py:
        from the profile and the reservations; costs W·S log S for W waiting sets).
        ``now`` is the core's last event time at the earliest; nothing changes."""
        if now < self._books.now:
            raise ValueError(f"time went backwards: {now} < {self._books.now}")
        waiting = self._waitlist.queue.members() | set().union(*self._books.holders.values())
        parts = (self._books, self._profile, self._placer, self._backfill)
        return forecasts(*parts, waiting, now)

    def declared_ends(self) -> dict[str, float]:
        """Every busy system and its declared end (what a recomputation must equal)."""
        return self._profile.snapshot()

    def candidates(
        self, system: SystemEntry, now: float
    ) -> Generator[tuple[SetEntry, str], None, None]:
        """Waiting sets that may use ``system``, best first by its order at ``now`` (with the
        class through which each would take it); close the walk when done."""
        classes = self._index.classes_of.get(system.fqdn, set())
        return self._waitlist.queue.candidates(
            system, classes, self._books.sets, self._policy, now, self._config
        )
