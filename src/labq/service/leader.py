"""One scheduler per PostgreSQL database: leadership by a session advisory lock.

Every ``labq server`` on PostgreSQL runs a :class:`Leadership` thread. It opens
a connection of its own and tries ``pg_try_advisory_lock(LOCK_ID)`` every
``retry_every`` seconds. The one that gets it calls ``on_elected`` (rebuild the
scheduler from the database, adopt supervisors) and keeps the connection for
as long as it lives, checking it every ``check_every`` seconds. When the leader
dies its session ends and PostgreSQL frees the lock, so a standby takes it on
its next try. A leader whose connection breaks cannot know whether another took
over, so it calls ``on_lost`` (stop scheduling at once) and goes back to trying.

The lock alone cannot stop a leader that has not noticed yet: between a cut
and the next check it would go on deciding. So every leader also takes the next
*epoch* in the database and every scheduling transaction is fenced by it
(:mod:`labq.store.leadership`); a deposed leader's writes fail, and it
resigns (:meth:`~Leadership.resign`). The connection is named ``labq leader`` in
``pg_stat_activity``.

SQLite needs none of this: one process owns the file (see ``docs/operations.md``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import psycopg

LOCK_ID: Final = 0x6C616273  # "labs"; the migration lock is 0x6C616271 ("labq")
APPLICATION_NAME: Final = "labq leader"
RETRY_EVERY: Final = 2.0
CHECK_EVERY: Final = 2.0

log = logging.getLogger("labq.leader")


class Leadership:
    """Wins, holds and loses the scheduler's advisory lock; see the module docstring."""

    def __init__(
        self,
        conninfo: str,
        *,
        on_elected: Callable[[], None],
        on_lost: Callable[[], None],
        retry_every: float = RETRY_EVERY,
        check_every: float = CHECK_EVERY,
    ) -> None:
        self.conninfo = conninfo
        self.on_elected = on_elected
        self.on_lost = on_lost
        self.retry_every = retry_every
        self.check_every = check_every
        self.leading = False
        self._stopping = threading.Event()
        self._resigning = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start campaigning in a thread."""
        self._thread = threading.Thread(target=self._run, name="labq-leader", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Step down (if leading) and stop; closing the connection frees the lock."""
        self._stopping.set()
        self._resigning.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def resign(self) -> None:
        """Give the lock back (another leader holds the epoch) and campaign again."""
        self._resigning.set()

    def _run(self) -> None:
        import psycopg  # here: a server on SQLite (no leadership to win) never needs it

        while not self._stopping.is_set():
            self._resigning.clear()
            try:
                with psycopg.connect(
                    self.conninfo, autocommit=True, application_name=APPLICATION_NAME
                ) as conn:
                    if self._campaign(conn):
                        self._lead(conn)
            except psycopg.Error as exc:
                log.warning("the leadership connection failed: %s", exc)
            finally:
                self._step_down()
            self._stopping.wait(self.retry_every)

    def _campaign(self, conn: psycopg.Connection[tuple[object, ...]]) -> bool:
        """Try for the lock until it is ours (True) or we are stopping (False)."""
        while not self._stopping.is_set():
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_ID,)).fetchone()
            if row is not None and row[0] is True:
                return True
            self._stopping.wait(self.retry_every)
        return False

    def _lead(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        log.info("this server is the scheduler's leader")
        self.leading = True
        try:
            self.on_elected()
        except Exception:
            log.exception("taking over the scheduler failed; giving the lock back")
            return
        while not self._resigning.wait(self.check_every):
            conn.execute("SELECT 1")  # raises once the session (and with it the lock) is gone

    def _step_down(self) -> None:
        if not self.leading:
            return
        self.leading = False
        log.warning("this server no longer leads the scheduler")
        try:
            self.on_lost()
        except Exception:
            log.exception("stepping down failed")
