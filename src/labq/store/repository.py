"""The repository: every storage operation labq has, on one connection.

The caller owns the transaction (see :func:`transaction`); each method that
writes is atomic on its own (a SAVEPOINT), so one that raises leaves nothing
behind. The parts live in focused modules; this class only puts them together.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, select

from labq.store.access import AccessStore
from labq.store.accounting import AccountingStore
from labq.store.admission import AdmissionStore
from labq.store.agents import AgentStore
from labq.store.batch import BatchMoves
from labq.store.database import READ_ONLY
from labq.store.extensions import ExtensionStore
from labq.store.leadership import LeadershipStore
from labq.store.listing import JobListing
from labq.store.locks import LockStore
from labq.store.notices import NoticeStore
from labq.store.passwords import PasswordStore
from labq.store.reporting import ReportStore
from labq.store.reservations import ReservationStore
from labq.store.retention import RetentionStore
from labq.store.retries import RetryStore
from labq.store.runs import RunStore
from labq.store.selection import JobSelection
from labq.store.sources import SourceStore
from labq.store.supervisors import SupervisorStore
from labq.store.sysedit import SystemEditStore
from labq.store.tables import Activity
from labq.store.tokens import TokenStore
from labq.store.unfinished import RestoreStore
from labq.store.views import ActivityEntry


class Repository(
    NoticeStore,
    SystemEditStore,
    BatchMoves,
    RestoreStore,
    AdmissionStore,
    AccessStore,
    RetryStore,
    RunStore,
    JobSelection,
    JobListing,
    TokenStore,
    PasswordStore,
    ReportStore,
    AgentStore,
    SupervisorStore,
    LockStore,
    LeadershipStore,
    AccountingStore,
    ReservationStore,
    RetentionStore,
    SourceStore,
    ExtensionStore,
):
    """Labs, systems, pools, people, access rules, jobs, recipe moves and the activity log;
    tokens and passwords; task reports and supervisors; what the scheduler rebuilds from;
    dependencies, filter rules and paused lab queues.
    """

    def activity(
        self, *, kind: str | None = None, object_id: int | None = None, limit: int = 100
    ) -> list[ActivityEntry]:
        """The newest entries of the activity log, optionally about one kind or object."""
        stmt = select(Activity).order_by(Activity.at.desc(), Activity.id.desc()).limit(limit)
        if kind is not None:
            stmt = stmt.where(Activity.object_kind == kind)
        if object_id is not None:
            stmt = stmt.where(Activity.object_id == object_id)
        return [
            ActivityEntry(
                at=row.at,
                actor=row.actor,
                object_kind=row.object_kind,
                object_id=row.object_id,
                object_name=row.object_name,
                action=row.action,
                old_value=row.old_value,
                new_value=row.new_value,
                reason=row.reason,
            )
            for row in self.conn.execute(stmt)
        ]


@contextmanager
def transaction(engine: Engine, *, savepoints: bool = True) -> Iterator[Repository]:
    """A repository on one transaction: committed at the end, rolled back if it raises.

    ``savepoints=False`` for a caller that rolls the whole transaction back on any
    error (see :meth:`~labq.store.base.StoreBase.atomic`).
    """
    with engine.begin() as conn:
        yield Repository(conn, savepoints=savepoints)


@contextmanager
def reading(engine: Engine) -> Iterator[Repository]:
    """A repository for reads only; its transaction is always rolled back.

    On SQLite it begins DEFERRED, so readers never queue behind the writer (WAL).
    """
    with engine.connect() as conn:
        conn.execution_options(**{READ_ONLY: True})
        with conn.begin() as tx:
            try:
                yield Repository(conn)
            finally:
                tx.rollback()
