"""Stopping a set early: the one stop every task and hook of the set watches.

The first reason given wins, except that a lost set (no longer this supervisor's)
overrides any other: then nothing more is touched or reported.
"""

from __future__ import annotations

import enum
import threading

from labq.dispatch.reporting import SafeReporter


class StopKind(enum.Enum):
    """Why a set stopped early; the first reason given wins."""

    CANCEL = "cancel"
    MAX_TIME = "max_time"
    ABORT = "abort"
    LOST = "lost"  # the set is no longer ours: end the tasks, touch and report nothing more


class Stop:
    """A set's stop: :meth:`request` it from any thread; ``event`` is what tasks watch."""

    def __init__(self, reporter: SafeReporter) -> None:
        self._reporter = reporter
        self._lock = threading.Lock()
        self.event = threading.Event()
        self.kind: StopKind | None = None
        self.reason = ""

    def is_set(self) -> bool:
        """Whether the set is stopping (or ending: :meth:`end` was called)."""
        return self.event.is_set()

    def request(self, kind: StopKind, reason: str) -> None:
        """Stop the set for ``reason``, unless it stops already (a loss overrides any other)."""
        with self._lock:
            if self.kind is not None and kind is not StopKind.LOST:
                return
            if self.kind is StopKind.LOST:
                return
            self.kind, self.reason = kind, reason
        self._reporter.log(f"stopping the set: {reason}")
        self.event.set()

    def end(self) -> None:
        """The set has ended: anything still watching stops, with no reason given."""
        self.event.set()
