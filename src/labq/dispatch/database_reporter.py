"""The :class:`~labq.dispatch.results.Reporter` a supervisor runs with: every callback
is one short transaction on the repository.

Recipe moves carry their system with them (``move_recipe``); a final move also
records the recipe's result (the worst of its tasks', at least ``warn`` when it
did not complete) and where its logs are, in the same transaction. A heartbeat
that the database answers with "stop" (a stop was requested) sets the cancel
event the runner watches; every write and heartbeat is guarded by the set's
claim, and one that finds the claim gone (the set ended or another supervisor
has it) sets ``lost`` as well: the runner then stops without touching anything.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from sqlalchemy import Engine

from labq.domain.states import RecipeState, Result, worst_result
from labq.domain.stops import stopped_state
from labq.errors import ClaimLost
from labq.store import Repository, reading, transaction
from labq.store.supervisors import Beat

Clock = Callable[[], datetime]

# How the runner words the end of a task it stopped (docs/execution.md, Results).
_CANCELLED: Final = "cancelled"
_ABORTED_PREFIXES: Final = ("timed out after", "killed:", "could not run:")


def utc_now() -> datetime:
    """The current time, timezone-aware UTC (what the repository wants)."""
    return datetime.now(UTC)


def task_status(result: Result, message: str) -> str:
    """The stored status of a task the runner reported ended: how it ended, not its result."""
    if message == _CANCELLED:
        return "cancelled"
    if result is Result.FAIL and message.startswith(_ABORTED_PREFIXES):
        return "aborted"
    return "completed"


class DatabaseReporter:
    """Reports one recipe set's run to the database, one transaction per callback, each
    guarded by the set's claim.

    ``log_root`` is the set's log directory (``<data_dir>/logs/set-<id>``): each
    recipe's log directory, recorded when the recipe starts waiting, is
    ``log_root/<fqdn>``. ``cancel`` is set when a heartbeat is told to stop.
    ``lost`` (and ``cancel``) are set, and nothing more is written, once the claim
    is found gone — or once no heartbeat got through for ``lease`` seconds, since
    the server then may end the set and hand its systems on.
    """

    def __init__(
        self,
        engine: Engine,
        set_id: int,
        claim: str,
        clock: Clock = utc_now,
        *,
        cancel: threading.Event | None = None,
        lost: threading.Event | None = None,
        lease: float | None = None,
        log_root: Path | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self.set_id = set_id
        self.claim = claim
        self.clock = clock
        self.cancel = cancel if cancel is not None else threading.Event()
        self.lost = lost if lost is not None else threading.Event()
        self.lease = lease
        self.log_root = log_root
        self.monotonic = monotonic
        self.stop_requested = False
        self._last_beat = monotonic()
        self._task_recipe: dict[int, int] = {}
        self._fqdn: dict[int, str] = {}
        self._results: dict[int, list[Result]] = {}
        with reading(engine) as repo:
            for recipe in repo.jobs.get_recipe_set(set_id).recipes:
                self._results[recipe.id] = []
                if recipe.system is not None:
                    self._fqdn[recipe.id] = recipe.system
                for task in recipe.tasks:
                    self._task_recipe[task.id] = recipe.id

    @contextmanager
    def _guarded(self) -> Iterator[Repository]:
        """A transaction that writes only while the claim is still ours."""
        if self.lost.is_set():
            raise ClaimLost(f"recipe set {self.set_id}: the claim was lost; nothing is written")
        try:
            with transaction(self.engine) as repo:
                repo.supervisors.guard_claim(self.set_id, self.claim)
                yield repo
        except ClaimLost:
            self._lose()
            raise

    def _lose(self) -> None:
        self.lost.set()
        self.cancel.set()

    def recipe_state(self, recipe_id: int, state: RecipeState, reason: str | None = None) -> None:
        """Move the recipe; a final move also records its result and log directory."""
        now = self.clock()
        with self._guarded() as repo:
            if state is RecipeState.WAITING and self.log_root is not None:
                fqdn = self._fqdn.get(recipe_id)
                if fqdn is not None:
                    repo.reports.set_log_dir(recipe_id, str(self.log_root / fqdn))
            if state.is_final:
                results: list[Result | None] = list(self._results.get(recipe_id, []))
                if state is not RecipeState.COMPLETED:
                    results.append(Result.WARN)
                repo.reports.set_recipe_result(recipe_id, worst_result(results))
            if state is RecipeState.CANCELLED:  # the canceller's words, when they gave some
                stop = repo.jobs.get_recipe_set(self.set_id).stop_reason
                reason = stop or reason
                state = RecipeState.CANCELLED if stop is None else stopped_state(stop)
            repo.moves.move_recipe(recipe_id, state, now=now, reason=reason)

    def task_started(self, task_id: int) -> None:
        """The task runs."""
        now = self.clock()
        with self._guarded() as repo:
            repo.reports.start_task(task_id, now=now)

    def task_finished(
        self, task_id: int, exit_code: int | None, result: Result, log_path: Path, message: str
    ) -> None:
        """The task ended: its status, result, exit code, log and message."""
        recipe_id = self._task_recipe.get(task_id)
        if recipe_id is not None:
            self._results.setdefault(recipe_id, []).append(result)
        now = self.clock()
        with self._guarded() as repo:
            repo.reports.finish_task(
                task_id,
                now=now,
                status=task_status(result, message),
                result=result,
                exit_code=exit_code,
                log_path=str(log_path),
                message=message,
            )

    def heartbeat(self) -> float | None:
        """Record that this supervisor is alive; the database may answer "stop" or "gone".

        Answers the set's max_time with its extensions, as stored now. A heartbeat
        that cannot get through is retried at the next beat; after ``lease`` seconds
        without one the set is given up as lost.
        """
        if self.lost.is_set():
            return None
        try:
            with transaction(self.engine) as repo:
                beat = repo.supervisors.heartbeat(self.set_id, now=self.clock(), claim=self.claim)
                max_time = repo.extensions.current_max_time(self.set_id)
        except Exception:
            if self.lease is not None and self.monotonic() - self._last_beat > self.lease:
                self._lose()
            raise
        self._last_beat = self.monotonic()
        if beat is Beat.LOST:
            self._lose()
        elif beat is Beat.STOP:
            self.stop_requested = True
            self.cancel.set()
        return None if max_time is None else float(max_time)

    def log(self, message: str) -> None:
        """Nothing to store: the runner already wrote it to ``supervisor.log``."""
