"""The scheduler service: one thread owns the scheduling core.

The API commits what people ask for, then posts an event to this service
(:mod:`labq.domain.events`: ``JobSubmitted``, ``JobsCancelled``, …); the
dispatcher posts to its inbox when a supervisor exits. Each event is handled in
one database transaction by its handler (:mod:`labq.service.events`): the core
decides, the decisions are committed, and only after the commit does anything
act on them (a set is handed to the dispatcher, a supervisor is stopped). If a
transaction fails, the core is thrown away and rebuilt from the database, which
is the truth.
"""

from __future__ import annotations

import gc
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Final, Protocol

from sqlalchemy.engine import Engine

from labq.config import Settings
from labq.domain.events import Event
from labq.domain.queue import QueueRow, SetForecast
from labq.errors import ConflictError, IllegalTransition, LeadershipLost
from labq.scheduler.core import Scheduler
from labq.service import bridge, eligibility, forecasting, reservations, vms
from labq.service import events as handlers
from labq.service.actions import Actions, EndKept, Kill, Launch
from labq.service.inbox import (
    Barrier,
    ConsistencyDue,
    Handled,
    Inbox,
    ServiceEvent,
    Stopping,
    TimerDue,
    label_of,
)
from labq.service.outcome import Outcome
from labq.service.queueview import rows
from labq.store import Repository, reading, transaction
from labq.usecases.timing import DECISION_SECONDS

log = logging.getLogger("labq.scheduler")


class Dispatcher(Protocol):
    """What the service needs of the dispatcher (``labq.dispatch.dispatcher``)."""

    def start(self, set_id: int, claim: str) -> object: ...
    def stop(self, set_id: int) -> object: ...
    def kill(self, set_id: int) -> object: ...
    def running(self) -> list[int]: ...


# a core of fewer recipes and systems than this is not worth a walk of the whole heap
SETTLE_AT: Final = 500


def settle_heap(core_size: int, *, frozen: bool) -> bool:
    """Keep the collector off what lives as long as the core: collect once (an old core
    goes now), then freeze what is left, so that the collections an event's garbage sets
    off walk that garbage rather than a core of a hundred thousand sets (twice faster
    placing a thousand sets). Whether the heap is frozen now.

    The collection walks the whole process, whatever the core's size: for a small core
    it buys nothing (in a process holding much else, such as a test runner's, it cost
    seconds a rebuild), so below :data:`SETTLE_AT` it only thaws what an earlier, larger
    core froze (``frozen``), which would otherwise never be collected."""
    if core_size < SETTLE_AT and not frozen:
        return False
    gc.unfreeze()
    gc.collect()
    if core_size < SETTLE_AT:
        return False
    gc.freeze()
    return True


def utcnow() -> datetime:
    """The wall clock, in UTC (injectable for tests)."""
    return datetime.now(UTC)


class SchedulerService:
    """The scheduling core behind a queue of events, in its own thread."""

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        dispatcher: Dispatcher,
        clock: Callable[[], datetime] = utcnow,
        *,
        epoch: int,
        on_deposed: Callable[[], None] | None = None,
        inbox: Inbox | None = None,
    ):
        self.engine = engine
        self.settings = settings
        self.dispatcher = dispatcher
        self.clock = clock
        self.epoch = epoch  # the leader epoch every transaction is fenced by
        self.on_deposed = on_deposed
        self.deposed = threading.Event()
        self.lock = threading.RLock()  # guards the core for readers such as queue views
        self.core: Scheduler | None = None
        # given when the dispatcher, made first, posts supervisors' exits into it
        self.inbox = inbox or Inbox()
        self._context = handlers.Context(settings, dispatcher.running)
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self.handled = 0  # events handled, for tests and metrics
        self.wake_at: datetime | None = None  # when the first paused lab queue's pause ends
        self.reaper = vms.Reaper(engine, settings)  # kept VMs destroyed off this thread
        self._heap_frozen = False  # what settle_heap froze: a large core

    @classmethod
    def elected(
        cls,
        engine: Engine,
        settings: Settings,
        dispatcher: Dispatcher,
        *,
        holder: str,
        clock: Callable[[], datetime] = utcnow,
        on_deposed: Callable[[], None] | None = None,
        inbox: Inbox | None = None,
    ) -> SchedulerService:
        """A service for a newly elected leader: it takes the next leader epoch first."""
        with transaction(engine) as repo:
            epoch = repo.leadership.take_leadership(holder, now=clock())
        return cls(
            engine, settings, dispatcher, clock, epoch=epoch, on_deposed=on_deposed, inbox=inbox
        )

    # --- life --------------------------------------------------------------------

    def start(self) -> None:
        """Rebuild from the database, catch up, and start the scheduler thread."""
        self._rebuild(catch_up=True)
        if any(lab.vms is not None for lab in self.settings.labs.values()):
            orphans = threading.Thread(
                target=vms.destroy_orphans,
                args=(self.engine, self.settings, self.settings.data_path()),
                name="labq-vm-orphans",
                daemon=True,
            )
            orphans.start()
        self._thread = threading.Thread(target=self._run, name="labq-scheduler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Finish the event at hand and stop."""
        self._stopping.set()
        self.inbox.post(Stopping())
        if self._thread is not None:
            self._thread.join(timeout)
        self.reaper.stop(timeout)

    def drain(self, timeout: float = 10.0) -> None:
        """Wait until every event queued so far is handled (for tests and shutdown)."""
        done = threading.Event()
        self.inbox.post(Barrier(done))
        deadline = time.monotonic() + timeout
        while not done.wait(0.05) and not self._stopping.is_set():
            if time.monotonic() > deadline:
                return

    # --- events from the API and the dispatcher ----------------------------------

    def post(self, event: Event | ServiceEvent) -> None:
        """Queue ``event`` for the scheduler thread (the API's, or the service's own)."""
        self.inbox.post(event)

    def queue_view(self) -> list[QueueRow]:
        """Waiting sets in rank order, with the reason for each place."""
        with self.lock:
            if self.core is None:
                return []
            return rows(self.core, self.clock())

    def forecasts(self) -> Mapping[int, SetForecast]:
        """Each waiting and running set's forecast start and end (:mod:`.forecasting`): the
        core's under its lock, the predictions read from the store after."""
        with self.lock:
            if self.core is None:
                return {}
            now = self.clock()
            plans = forecasting.planned(self.core, now)
        if not plans:
            return {}
        with reading(self.engine) as repo:
            return forecasting.explained(repo, plans, now)

    # --- the thread -----------------------------------------------------------------

    def _run(self) -> None:
        every = self.settings.consistency_every
        next_pass = self.clock() + timedelta(seconds=every)
        while not self._stopping.is_set():
            due = next_pass if self.wake_at is None else min(next_pass, self.wake_at)
            wait = max(0.0, (due - self.clock()).total_seconds())
            try:
                event = self.inbox.take(wait)
            except queue.Empty:
                event = None
            if event is None and self.wake_at is not None and self.clock() >= self.wake_at:
                self._handle(TimerDue())  # a pause ran out
            elif event is None:
                self._handle(ConsistencyDue())
                next_pass = self.clock() + timedelta(seconds=every)
            elif isinstance(event, Barrier):
                event.done.set()
            elif isinstance(event, ConsistencyDue):
                self._handle(event)
                next_pass = self.clock() + timedelta(seconds=every)
            elif not isinstance(event, Stopping):
                self._handle(event)

    def _handle(self, event: Handled) -> None:
        now, name = self.clock(), label_of(event)
        try:
            if self.core is None:  # the last rebuild failed: the database was away
                self._rebuild(catch_up=True)
            timer = DECISION_SECONDS.labels(name).time()  # after the lock, with the commit
            with self.lock, timer, transaction(self.engine, savepoints=False) as repo:
                repo.leadership.fence(self.epoch)
                actions = self._decide(repo, event, now)
        except LeadershipLost as exc:
            self._depose(exc)
            return
        except Exception as exc:
            if isinstance(exc, ConflictError | IllegalTransition):  # a cancel raced the event
                log.warning("scheduling event %s met a change: %s; rebuilding", name, exc)
            else:
                log.exception("scheduling event %s failed; rebuilding", name)
            try:
                self._rebuild(catch_up=True)
            except LeadershipLost as exc:
                self._depose(exc)
            except Exception:
                log.exception("rebuilding failed; trying again at the next event")
                self.core = None
            return
        self.handled += 1
        self._act(actions)

    def _depose(self, why: LeadershipLost) -> None:
        """Another leader took over: act on nothing more, stop, and tell the server."""
        if self.deposed.is_set():
            return
        log.warning("this scheduler was deposed: %s", why)
        self.deposed.set()
        self._stopping.set()
        if self.on_deposed is not None:  # not from this thread: stepping down joins it
            threading.Thread(target=self.on_deposed, name="labq-deposed", daemon=True).start()

    def _decide(self, repo: Repository, event: Handled, now: datetime) -> Actions:
        """The event's handler, then the follow-up after every event (pauses that ran out,
        dependents of ended jobs); each outcome applied as it comes."""
        assert self.core is not None
        outcome = self._apply(handlers.handle(self._context, repo, self.core, event, now))
        assert self.core is not None
        follow = eligibility.follow_up(
            repo,
            self.core,
            now,
            wake_at=self.wake_at,
            jobs_may_have_ended=handlers.ends_jobs(event),
            # a submit ends no job: only the submitted ones' own dependencies may have ended
            only=handlers.submitted_jobs(event),
        )
        return outcome.actions + self._apply(follow).actions

    def _apply(self, outcome: Outcome) -> Outcome:
        """A fresh core and the timer's new time take effect (inside the transaction: if it
        fails, the rebuild replaces both)."""
        if outcome.core is not None:
            self.core = outcome.core
        if outcome.wake is not None:
            self.wake_at = outcome.wake.at
        return outcome

    def _act(self, actions: Actions) -> None:
        """After the commit: hand started sets to the dispatcher, stop cancelled ones."""
        for action in actions:
            try:
                if isinstance(action, Launch):
                    self.dispatcher.start(action.set, action.claim)
                elif isinstance(action, Kill):
                    self.dispatcher.kill(action.set)
                elif isinstance(action, EndKept):
                    self.reaper.destroy(action.system)
                else:
                    self.dispatcher.stop(action.set)
            except Exception:  # the consistency pass finds a set whose launch was lost
                log.exception("acting on %s failed", action)

    def _rebuild(self, *, catch_up: bool) -> None:
        with self.lock, transaction(self.engine, savepoints=False) as repo:
            repo.leadership.fence(self.epoch)
            vms.add_slots(repo, self.settings, now=self.clock())
            self.core = bridge.rebuild(repo, self.settings.scheduler())
            self.wake_at = reservations.next_wake(repo)
            actions = bridge.resume(repo, self.core, now=self.clock()) if catch_up else []
            if catch_up:  # what ended while nobody scheduled: dependents, pauses run out
                follow = eligibility.follow_up(repo, self.core, self.clock(), wake_at=self.wake_at)
                actions += self._apply(follow).actions
        self._act(actions)
        core_size = len(self.core.recipes) + len(self.core.systems)
        self._heap_frozen = settle_heap(core_size, frozen=self._heap_frozen)
