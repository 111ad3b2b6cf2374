"""The repository: every storage operation labq has, on one connection, in parts.

The caller owns the transaction (see :func:`transaction`); each method that
writes is atomic on its own (a SAVEPOINT), so one that raises leaves nothing
behind. A repository holds one part per subject (``repo.jobs``, ``repo.systems``,
``repo.moves``, …), all on one :class:`~labq.store.base.Db`; a part that needs
another is given it when the repository is made, never inherits it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine

from labq.store.access import AccessStore
from labq.store.accounting import AccountingStore
from labq.store.activity import ActivityStore
from labq.store.admission import AdmissionStore
from labq.store.agents import AgentStore
from labq.store.base import Db
from labq.store.batch import BatchMoves
from labq.store.database import READ_ONLY
from labq.store.distros import DistroStore
from labq.store.extensions import ExtensionStore
from labq.store.figures import FigureStore
from labq.store.filters import FilterStore
from labq.store.history import HistoryStore
from labq.store.jobs import JobStore
from labq.store.leadership import LeadershipStore
from labq.store.locks import LockStore
from labq.store.moves import RecipeMoves
from labq.store.notices import NoticeStore
from labq.store.passwords import PasswordStore
from labq.store.pauses import PauseStore
from labq.store.people import PeopleStore
from labq.store.queue import QueueStore
from labq.store.reporting import ReportStore
from labq.store.reservations import ReservationStore
from labq.store.retention import RetentionStore
from labq.store.retries import RetryStore
from labq.store.runs import RunStore
from labq.store.sources import SourceStore
from labq.store.supervisors import SupervisorStore
from labq.store.sysedit import SystemEditStore
from labq.store.systems import SystemStore
from labq.store.tokens import TokenStore
from labq.store.unfinished import RestoreStore


class Repository:
    """The parts of the store on one transaction; call them as ``repo.<part>.<method>(…)``."""

    # People and what they hold
    people: PeopleStore  # users, groups, memberships
    passwords: PasswordStore
    tokens: TokenStore
    # Labs and systems
    access: AccessStore  # pools and their access rules
    systems: SystemStore  # labs, systems, conditions, usage history
    system_edits: SystemEditStore  # editing and removing systems
    reservations: ReservationStore
    distros: DistroStore  # each lab's distro trees
    # Jobs
    jobs: JobStore  # every read of a job, its sets and recipes
    queue: QueueStore  # submitting, cancelling, reprioritising
    sources: SourceStore  # the documents jobs came from, clones
    runs: RunStore
    history: HistoryStore  # how long past runs took, for predictions
    retries: RetryStore
    extensions: ExtensionStore  # extending the max_time of running sets
    admission: AdmissionStore  # dependencies, and what a job's sets may do
    filters: FilterStore  # admission filter rules
    pauses: PauseStore  # paused lab queues
    # Recipes moving through their states, and the scheduler's view
    moves: RecipeMoves
    batch: BatchMoves  # many moves of one decision at once
    restore: RestoreStore  # what the scheduler rebuilds from
    locks: LockStore
    # Running sets
    supervisors: SupervisorStore
    agents: AgentStore
    reports: ReportStore  # tasks started and finished, recipe results
    # The installation, its records and its figures
    leadership: LeadershipStore
    log: ActivityStore
    notices: NoticeStore  # webhooks and notifications
    retention: RetentionStore
    accounting: AccountingStore
    figures: FigureStore  # what /metrics and the charts count

    def __init__(self, conn: Connection, *, savepoints: bool = True) -> None:
        self.db = db = Db(conn, savepoints=savepoints)
        self.conn = conn
        self.people = PeopleStore(db)
        self.passwords = PasswordStore(db)
        self.tokens = TokenStore(db, self.people)
        self.access = AccessStore(db)
        self.systems = SystemStore(db)
        self.supervisors = SupervisorStore(db)
        self.system_edits = SystemEditStore(db, self.access, self.systems, self.supervisors)
        self.reservations = ReservationStore(db)
        self.distros = DistroStore(db)
        self.moves = RecipeMoves(db)
        self.jobs = JobStore(db)
        self.queue = QueueStore(db, self.people, self.moves)
        self.sources = SourceStore(db)
        self.runs = RunStore(db, self.jobs, self.queue)
        self.history = HistoryStore(db)
        self.retries = RetryStore(db, self.jobs, self.queue)
        self.extensions = ExtensionStore(db)
        self.filters = FilterStore(db)
        self.pauses = PauseStore(db)
        self.admission = AdmissionStore(db, self.moves, self.filters)
        self.batch = BatchMoves(db, self.moves, self.systems, self.supervisors)
        self.restore = RestoreStore(db, self.admission, self.systems)
        self.locks = LockStore(db)
        self.agents = AgentStore(db, self.supervisors)
        self.reports = ReportStore(db)
        self.leadership = LeadershipStore(db)
        self.log = ActivityStore(db)
        self.notices = NoticeStore(db, self.jobs)
        self.retention = RetentionStore(db)
        self.accounting = AccountingStore(db)
        self.figures = FigureStore(db)

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """One all-or-nothing step over several parts (see :meth:`Db.atomic`)."""
        with self.db.atomic():
            yield


@contextmanager
def transaction(engine: Engine, *, savepoints: bool = True) -> Iterator[Repository]:
    """A repository on one transaction: committed at the end, rolled back if it raises.

    ``savepoints=False`` for a caller that rolls the whole transaction back on any
    error (see :meth:`~labq.store.base.Db.atomic`).
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
