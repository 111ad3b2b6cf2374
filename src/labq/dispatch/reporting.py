"""The reporter as the runner uses it: one call at a time, failures written down.

Every call is also written to the set's ``supervisor.log``, with secrets
masked, so the log tells the whole story even when the database did not hear it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from labq.dispatch.logs import MASK, MaskedLog, stamp
from labq.dispatch.results import Reporter
from labq.domain.states import RecipeState, Result


class SafeReporter:
    """Wraps a :class:`Reporter`: serialised, logged, and never raising."""

    def __init__(self, inner: Reporter, log: MaskedLog, secrets: Iterable[str] = ()) -> None:
        self._inner = inner
        self._log = log
        self._secrets = sorted((s for s in secrets if s), key=len, reverse=True)
        self._lock = threading.Lock()
        self._errors: list[str] = []

    def mask(self, text: str) -> str:
        """``text`` with every secret replaced."""
        for secret in self._secrets:
            text = text.replace(secret, MASK.decode())
        return text

    def _call(self, line: str | None, call: Callable[[], None]) -> None:
        with self._lock:
            if line is not None:
                self._log.line(f"{stamp()} {self.mask(line)}")
            try:
                call()
            except Exception as exc:
                error = self.mask(f"reporter failed: {exc!r}")
                self._errors.append(error)
                self._log.line(f"{stamp()} {error}")

    def recipe_state(self, recipe_id: int, state: RecipeState, reason: str | None = None) -> None:
        """Report a recipe's move."""
        reason = self.mask(reason) if reason is not None else None
        text = f"recipe {recipe_id} is {state.value}" + (f": {reason}" if reason else "")
        self._call(text, lambda: self._inner.recipe_state(recipe_id, state, reason))

    def task_started(self, task_id: int) -> None:
        """Report that a task began."""
        self._call(f"task {task_id} started", lambda: self._inner.task_started(task_id))

    def task_finished(
        self, task_id: int, exit_code: int | None, result: Result, log_path: Path, message: str
    ) -> None:
        """Report how a task ended."""
        message = self.mask(message)
        self._call(
            f"task {task_id} finished: {result.value} ({message})",
            lambda: self._inner.task_finished(task_id, exit_code, result, log_path, message),
        )

    def heartbeat(self) -> float | None:
        """Tell the supervisor glue we are alive (not written to the log); the set's
        max_time as the answer says it now, if it says."""
        heard: list[float | None] = [None]

        def beat() -> None:
            heard[0] = self._inner.heartbeat()

        self._call(None, beat)
        return heard[0]

    def log(self, message: str) -> None:
        """A line for people."""
        message = self.mask(message)
        self._call(message, lambda: self._inner.log(message))

    def errors(self) -> tuple[str, ...]:
        """Every reporter failure so far."""
        with self._lock:
            return tuple(self._errors)
