"""The server's housekeeping thread: job-end notifications and log retention.

It runs while this process leads (one sender, one pruner per installation), off the
scheduler's thread and the API's, so neither ever waits for an SMTP server, a webhook
receiver or a large deletion.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from sqlalchemy import Engine

from labq.config import Settings
from labq.service.outbox import Outbox
from labq.usecases.retention import prune

log = logging.getLogger("labq.housekeeping")


class Housekeeper:
    """Runs the outbox every ``notify.every`` seconds and the pruner every
    ``retention.prune_every`` (the first time at once)."""

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        clock: Callable[[], datetime],
        *,
        ui_base: str | None = None,
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.clock = clock
        self.outbox = Outbox(engine, settings.notify, clock, ui_base=ui_base)
        self.data_dir: Path = settings.data_path()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread."""
        self._thread = threading.Thread(target=self._run, name="labq-housekeeping", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 15.0) -> None:
        """Stop after the current step (a send has its own timeout)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        next_prune = time.monotonic()
        while not self._stopping.is_set():
            self._step("sending notifications", self.outbox.run_once)
            if time.monotonic() >= next_prune:
                self._step("pruning logs", self._prune)
                next_prune = time.monotonic() + self.settings.retention.prune_every
            self._stopping.wait(self.settings.notify.every)

    def _prune(self) -> None:
        prune(self.engine, self.settings.retention, self.data_dir, now=self.clock())

    def _step(self, what: str, step: Callable[[], object]) -> None:
        try:
            step()
        except Exception:  # a bad pass must not end the thread; the next one tries again
            log.exception("%s failed", what)
