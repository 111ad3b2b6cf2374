"""The scheduler service: one thread owns the scheduling core.

The API commits what people ask for, then tells this service (``job_submitted``,
``jobs_cancelled``, …); the dispatcher tells it when a supervisor exits. Each
event is handled in one database transaction: the core decides, the decisions
are committed, and only after the commit does anything act on them (a set is
handed to the dispatcher, a supervisor is stopped). If a transaction fails, the
core is thrown away and rebuilt from the database, which is the truth.
"""

from __future__ import annotations

import gc
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, Protocol

from sqlalchemy.engine import Engine

from labq.api.events import QueueRow
from labq.config import Settings
from labq.errors import ConflictError, IllegalTransition, LeadershipLost
from labq.scheduler.core import Scheduler
from labq.service import bridge, eligibility, reservations
from labq.service import events as handlers
from labq.service.actions import Actions, Kill, Launch
from labq.service.queueview import rows
from labq.service.timing import DECISION_SECONDS
from labq.store import Repository, transaction

log = logging.getLogger("labq.scheduler")

JOB_EVENTS: Final = frozenset({"submit", "cancel", "priority"})  # keyed by a job id
SET_EVENTS: Final = frozenset({"locks", "ended"})  # keyed by a recipe set id
MAX_SUBMITS: Final = 1000  # queued submissions taken together in one event
# events after which a job may have ended (or been submitted as its dependency ended)
ENDING_EVENTS: Final = frozenset(
    {"submit", "cancel", "finished", "ended", "consistency", "filters"}
)
KINDS: Final = (
    JOB_EVENTS | SET_EVENTS | {"system", "condition", "access", "filters", "pause", "reservation"}
)


class Dispatcher(Protocol):
    """What the service needs of the dispatcher (``labq.dispatch.dispatcher``)."""

    def start(self, set_id: int, claim: str) -> object: ...
    def stop(self, set_id: int) -> object: ...
    def kill(self, set_id: int) -> object: ...
    def running(self) -> list[int]: ...


@dataclass(frozen=True)
class Event:
    """One thing for the scheduler thread to handle."""

    kind: str
    key: int | str | None = None
    code: int | None = None
    claim: str | None = None  # "finished": the claim the exited supervisor carried
    done: threading.Event | None = None  # set once handled (barriers)
    jobs: tuple[int, ...] = ()  # "submit": every job of a run of queued submissions


def settle_heap() -> None:
    """Keep the collector off what lives as long as the core: collect once (an old core
    goes now), then freeze what is left, so that the collections an event's garbage sets
    off walk that garbage rather than a core of a hundred thousand sets (twice faster
    placing a thousand sets)."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


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
        self._events: queue.Queue[Event] = queue.Queue()
        self._held: Event | None = None  # taken from the queue while gathering submissions
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self.handled = 0  # events handled, for tests and metrics
        self.wake_at: datetime | None = None  # when the first paused lab queue's pause ends

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
    ) -> SchedulerService:
        """A service for a newly elected leader: it takes the next leader epoch first."""
        with transaction(engine) as repo:
            epoch = repo.leadership.take_leadership(holder, now=clock())
        return cls(engine, settings, dispatcher, clock, epoch=epoch, on_deposed=on_deposed)

    # --- life --------------------------------------------------------------------

    def start(self) -> None:
        """Rebuild from the database, catch up, and start the scheduler thread."""
        self._rebuild(catch_up=True)
        self._thread = threading.Thread(target=self._run, name="labq-scheduler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Finish the event at hand and stop."""
        self._stopping.set()
        self._events.put(Event("wake"))
        if self._thread is not None:
            self._thread.join(timeout)

    def drain(self, timeout: float = 10.0) -> None:
        """Wait until every event queued so far is handled (for tests and shutdown)."""
        done = threading.Event()
        self._events.put(Event("barrier", done=done))
        deadline = time.monotonic() + timeout
        while not done.wait(0.05) and not self._stopping.is_set():
            if time.monotonic() > deadline:
                return

    # --- events from the API and the dispatcher ----------------------------------

    def job_submitted(self, job_id: int) -> None:
        self._events.put(Event("submit", job_id))

    def jobs_cancelled(self, job_id: int) -> None:
        self._events.put(Event("cancel", job_id))

    def priority_changed(self, job_id: int) -> None:
        self._events.put(Event("priority", job_id))

    def system_added(self, fqdn: str) -> None:
        self._events.put(Event("system", fqdn))

    def condition_changed(self, fqdn: str) -> None:
        self._events.put(Event("condition", fqdn))

    def access_changed(self) -> None:
        self._events.put(Event("access"))

    def locks_changed(self, set_id: int) -> None:
        self._events.put(Event("locks", set_id))

    def filters_changed(self) -> None:
        self._events.put(Event("filters"))

    def pause_changed(self, lab: str) -> None:
        self._events.put(Event("pause", lab))

    def reservation_changed(self, fqdn: str) -> None:
        self._events.put(Event("reservation", fqdn))

    def set_ended(self, set_id: int) -> None:
        self._events.put(Event("ended", set_id))

    def post(self, kind: str, key: int | str | None = None) -> None:
        """Queue an event by name (from another process: ``labq.service.notify``)."""
        if kind not in KINDS and kind != "consistency":
            raise ValueError(f"unknown scheduler event {kind!r}")
        self._events.put(Event(kind, key))

    def queue_view(self) -> list[QueueRow]:
        """Waiting sets in rank order, with the reason for each place."""
        with self.lock:
            if self.core is None:
                return []
            return rows(self.core, self.clock())

    def set_finished(self, set_id: int, code: int | None, claim: str) -> None:
        """The dispatcher saw the supervisor carrying ``claim`` exit, with everything it ran
        (``code`` None: it was already gone)."""
        self._events.put(Event("finished", set_id, code, claim))

    # --- the thread -----------------------------------------------------------------

    def _run(self) -> None:
        every = self.settings.consistency_every
        next_pass = self.clock() + timedelta(seconds=every)
        while not self._stopping.is_set():
            due = next_pass if self.wake_at is None else min(next_pass, self.wake_at)
            wait = max(0.0, (due - self.clock()).total_seconds())
            try:
                event: Event | None = self._next(wait)
            except queue.Empty:
                event = None
            if event is None and self.wake_at is not None and self.clock() >= self.wake_at:
                self._handle(Event("pauses"))  # a pause ran out
            elif event is None:
                self._handle(Event("consistency"))
                next_pass = self.clock() + timedelta(seconds=every)
            elif event.done is not None:
                event.done.set()
            elif event.kind == "consistency":
                self._handle(event)
                next_pass = self.clock() + timedelta(seconds=every)
            elif event.kind != "wake":
                self._handle(event)

    def _next(self, wait: float) -> Event:
        """The next event; submissions queued one after another come as one (their jobs in
        ``jobs``), handled in one transaction."""
        if self._held is not None:
            event, self._held = self._held, None
        else:
            event = self._events.get(timeout=wait)
        if event.kind != "submit":
            return event
        jobs = [int(event.key or 0)]
        while len(jobs) < MAX_SUBMITS:
            try:
                later = self._events.get_nowait()
            except queue.Empty:
                break
            if later.kind != "submit":
                self._held = later
                break
            jobs.append(int(later.key or 0))
        return Event("submit", jobs[0], jobs=tuple(jobs))

    def _handle(self, event: Event) -> None:
        now = self.clock()
        try:
            if self.core is None:  # the last rebuild failed: the database was away
                self._rebuild(catch_up=True)
            timer = DECISION_SECONDS.labels(event.kind).time()  # after the lock, with the commit
            with self.lock, timer, transaction(self.engine, savepoints=False) as repo:
                repo.leadership.fence(self.epoch)
                assert self.core is not None
                actions = self._decide(repo, self.core, event, now)
        except LeadershipLost as exc:
            self._depose(exc)
            return
        except Exception as exc:
            if isinstance(exc, ConflictError | IllegalTransition):  # a cancel raced the event
                log.warning("scheduling event %s met a change: %s; rebuilding", event.kind, exc)
            else:
                log.exception("scheduling event %s failed; rebuilding", event.kind)
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

    def _decide(self, repo: Repository, core: Scheduler, event: Event, now: datetime) -> Actions:
        actions = handlers.decide(self, repo, core, event, now)
        assert self.core is not None  # an ``access`` event puts a fresh core in place
        ends = event.kind in ENDING_EVENTS
        # a submit ends no job: only the submitted ones' own dependencies may have ended
        only = list(event.jobs or [int(event.key or 0)]) if event.kind == "submit" else None
        return actions + eligibility.follow_up(
            self, repo, self.core, now, jobs_may_have_ended=ends, only=only
        )

    def _act(self, actions: Actions) -> None:
        """After the commit: hand started sets to the dispatcher, stop cancelled ones."""
        for action in actions:
            try:
                if isinstance(action, Launch):
                    self.dispatcher.start(action.set, action.claim)
                elif isinstance(action, Kill):
                    self.dispatcher.kill(action.set)
                else:
                    self.dispatcher.stop(action.set)
            except Exception:  # the consistency pass finds a set whose launch was lost
                log.exception("acting on %s failed", action)

    def _rebuild(self, *, catch_up: bool) -> None:
        with self.lock, transaction(self.engine, savepoints=False) as repo:
            repo.leadership.fence(self.epoch)
            self.core = bridge.rebuild(repo, self.settings.scheduler())
            self.wake_at = reservations.next_wake(repo)
            actions = bridge.resume(repo, self.core, now=self.clock()) if catch_up else []
            if catch_up:  # what ended while nobody scheduled: dependents, pauses run out
                actions += eligibility.follow_up(self, repo, self.core, self.clock())
        self._act(actions)
        settle_heap()
