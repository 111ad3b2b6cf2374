"""The run times the core plans with, and EASY++'s raise of a running set that outlives one.

With ``backfill_on_predictions`` a set's *plan* (:attr:`SetEntry.plan`) is its
predicted run time, at most its ``max_time``; otherwise its ``max_time``. The
profile, the reservations and the backfill shelf all read the plan, so they need
nothing else to know of predictions. Kill times do not: the watchdog ends a set
at its declared ``max_time`` (no decision of the core carries a plan).

A running set that passes its planned end is raised as each event begins
(:meth:`Planner.catch_up`): step by step, never below the time it has run, never
above its ``max_time``. Only the sets the profile says are overdue are looked at
(log n per lab, plus what is raised), and the profile is changed in place —
what depends on it (reservations, missed searches) goes stale with its version.
"""

from __future__ import annotations

from labq.domain.prediction import raised
from labq.scheduler.books import Books
from labq.scheduler.entries import SchedulerConfig, SetEntry, plan_of
from labq.scheduler.profile import Profile
from labq.scheduler.waitlist import Waitlist


class Planner:
    """Keeps each set's plan: set from its prediction, raised while it runs past it."""

    def __init__(
        self, books: Books, profile: Profile, waitlist: Waitlist, config: SchedulerConfig
    ) -> None:
        self._books = books
        self._profile = profile
        self._waitlist = waitlist
        self._on = config.backfill_on_predictions
        self._steps = config.prediction_steps
        if self._on:
            books.on_begin.append(self.catch_up)

    def catch_up(self, now: float) -> None:
        """Raise every running set whose planned end is before ``now`` (EASY++)."""
        books = self._books
        for lab in list(books.free):
            seen: set[int] = set()
            for fqdn in self._profile.overdue(lab, now):
                recipe = books.systems[fqdn].recipe
                if recipe is None:
                    continue
                entry = books.sets[books.recipes[recipe].set_id]
                if entry.id in seen or entry.started_at is None or entry.plan is None:
                    continue
                seen.add(entry.id)
                if entry.max_time is not None and entry.plan >= entry.max_time:
                    continue  # planned on its declared time: as without predictions
                elapsed = now - entry.started_at
                first = plan_of(entry.predicted, entry.max_time, True)
                if first is None:
                    continue
                plan = raised(first, elapsed, entry.max_time, self._steps)
                self._replan(entry, plan)

    def change(self, entry: SetEntry, predicted: float | None) -> None:
        """The service learned a new prediction for the set (a waiting or running one)."""
        entry.predicted = predicted
        plan = plan_of(predicted, entry.max_time, self._on)
        if entry.started_at is not None and plan is not None:
            plan = max(plan, self._books.now - entry.started_at)  # never below what it ran
            if entry.max_time is not None:
                plan = min(plan, entry.max_time)
        if plan != entry.plan and not entry.finished:
            self._replan(entry, plan)

    def _replan(self, entry: SetEntry, plan: float | None) -> None:
        entry.plan = plan
        if entry.started_at is None:
            self._waitlist.reorder(entry)  # its cell on the shelf is by its plan
            return
        fqdns = [r.system for r in entry.recipes if r.system is not None]
        if entry.lab is None or not fqdns:
            return
        self._profile.vacate(fqdns)
        end = None if entry.busy_for is None else entry.started_at + entry.busy_for
        self._profile.occupy(entry.lab, fqdns, end)
