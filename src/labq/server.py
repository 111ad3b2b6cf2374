"""``labq server``: the HTTP API, the scheduler and the dispatcher in one process.

On SQLite the process always leads: it schedules and dispatches from the start.
On PostgreSQL every server serves the API, and the one that holds the advisory
lock (:mod:`labq.service.leader`) also schedules and dispatches; the others
forward their API's events by ``NOTIFY`` and take over when the leader dies.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.engine import Engine

from labq import datadir
from labq.config import Settings
from labq.datadir import DatabaseLock
from labq.dispatch.dispatcher import Dispatcher
from labq.domain.queue import QueueRow, SetForecast
from labq.entrance import Entrance
from labq.service import bridge
from labq.service.housekeeping import Housekeeper
from labq.service.inbox import Inbox
from labq.service.leader import Leadership
from labq.service.loop import SchedulerService, utcnow
from labq.service.notify import EventRouter, Listener, conninfo
from labq.service.routing import LabRouter
from labq.serving import ConnectionLimits, accept_backlog, allow_descriptors, protocol_class
from labq.store import database, reading, transaction
from labq.usecases.ports import WorkBell

log = logging.getLogger("labq.server")


@dataclass
class Server:
    """The parts of a running server, for the command and for tests."""

    url: str
    engine: Engine
    settings: Settings
    events: EventRouter
    api_url: str | None = None  # given to supervisors, whose tasks call the API
    leadership: Leadership | None = None  # None on SQLite: this process always leads
    listener: Listener | None = None
    scheduler: SchedulerService | None = None  # while this process leads
    dispatcher: Dispatcher | None = None
    housekeeper: Housekeeper | None = None  # notifications and log retention, while leading
    database_lock: DatabaseLock | None = None  # SQLite: one server per file
    bell: WorkBell = field(default_factory=WorkBell)  # wakes lab agents' waiting claims
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def lead(self) -> None:
        """Become the scheduler: take the next leader epoch, adopt or start supervisors,
        rebuild from the database. Every scheduling write is fenced by that epoch."""
        with self._lock:
            inbox = Inbox()  # the service's: a supervisor's exit is posted straight into it
            dispatcher = Dispatcher(
                self.url, self.settings, inbox.supervisor_exited, api_url=self.api_url
            )
            router = LabRouter(dispatcher, self.engine, self.bell)
            service = SchedulerService.elected(
                self.engine,
                self.settings,
                router,
                holder=_holder(),
                on_deposed=self.deposed,
                inbox=inbox,
            )
            epoch = service.epoch
            self.scheduler, self.dispatcher = service, dispatcher
            # Supervisors first: a dead one's end is queued and handled after the rebuild.
            _adopt(self.engine, dispatcher, router, epoch)
            self.events.service = service  # events queue from here on, handled after start
            service.start()
            self.housekeeper = Housekeeper(self.engine, self.settings, utcnow, ui_base=self.api_url)
            self.housekeeper.start()
            log.info(
                "leading the scheduler (epoch %d): %d sets running, supervisors in %s mode",
                epoch,
                len(dispatcher.running()),
                dispatcher.mode,
            )

    def deposed(self) -> None:
        """Another server took the leader epoch: stop acting at once, campaign again."""
        self.step_down()
        if self.leadership is not None:
            self.leadership.resign()

    def step_down(self) -> None:
        """Stop scheduling; supervisors keep running for the next leader to adopt."""
        with self._lock:
            self.events.service = None
            if self.housekeeper is not None:
                self.housekeeper.stop()
                self.housekeeper = None
            if self.scheduler is not None:
                self.scheduler.stop()
            if self.dispatcher is not None:
                self.dispatcher.shutdown()
            self.scheduler = self.dispatcher = None

    @property
    def service(self) -> EventRouter:
        """What the API tells (kept under its old name for callers such as ``labq demo``)."""
        return self.events

    def close(self) -> None:
        """Stop listening and scheduling, and let go of the leadership."""
        if self.leadership is not None:
            self.leadership.stop()  # steps down through on_lost
        if self.listener is not None:
            self.listener.stop()
        self.step_down()
        self.engine.dispose()
        if self.database_lock is not None:
            self.database_lock.release()


def assemble(settings: Settings, url: str | None = None, *, api_url: str | None = None) -> Server:
    """Upgrade the database, claim the data directory, and start leading (SQLite) or
    campaigning (PostgreSQL).

    ``api_url`` is where tasks reach this server's API (``LABQ_URL``).
    """
    data_dir = settings.data_path()
    url = url or settings.database or database.default_url(data_dir)
    log.info("database %s at schema %s", datadir.shown(url), database.upgrade(url))
    engine = database.make_engine(url)
    sqlite = engine.dialect.name == "sqlite"
    lock = _lock_sqlite(engine) if sqlite else None
    try:
        with reading(engine) as repo:
            datadir.claim(data_dir, repo.leadership.installation_id(), url)
    except Exception:
        if lock is not None:
            lock.release()
        engine.dispose()
        raise
    events = EventRouter(
        None if sqlite else engine,
        lambda: _standby_queue(engine, settings),
        lambda: _standby_forecasts(engine, settings),
    )
    server = Server(url, engine, settings, events, api_url=api_url, database_lock=lock)
    if sqlite:
        server.lead()
        return server
    # LISTEN before campaigning: whatever is committed later reaches the leader,
    # and whatever was committed before is in the database its rebuild reads.
    server.listener = Listener(url, events.deliver)
    server.listener.start()
    server.leadership = Leadership(conninfo(url), on_elected=server.lead, on_lost=server.step_down)
    server.leadership.start()
    return server


def _lock_sqlite(engine: Engine) -> DatabaseLock | None:
    """One server per SQLite file; the file (and the WAL files SQLite makes like it) is
    readable by the server's user only."""
    path = engine.url.database
    if not path or path == ":memory:":
        return None
    lock = DatabaseLock(Path(path).resolve())
    lock.acquire()
    Path(path).chmod(0o600)
    return lock


def _holder() -> str:
    return f"{socket.gethostname()} pid {os.getpid()}"


def _adopt(engine: Engine, dispatcher: Dispatcher, router: LabRouter, epoch: int) -> None:
    """Supervisors of this host that outlived the last leader are watched again; started
    sets no supervisor took up get a fresh claim (a late one finds its claim void) and a
    supervisor of their own."""
    here = socket.gethostname()
    launches: list[tuple[int, str]] = []
    with transaction(engine) as repo:
        repo.leadership.fence(epoch)
        for set_id, claim in repo.supervisors.unsupervised_sets():
            fresh = bridge.new_claim()
            if repo.supervisors.claim_set(set_id, fresh, now=utcnow(), replacing=claim):
                launches.append((set_id, fresh))
        supervised = (
            repo.supervisors.supervised_sets()
        )  # after the claims: one that took its set up
    mine = [(s.set_id, s.pid, s.claim) for s in supervised if s.host in (None, here)]
    alive = set(dispatcher.adopt(mine))
    for set_id, _pid, _claim in mine:
        if set_id not in alive:
            log.info("set %s: its supervisor is gone", set_id)
    for set_id, claim in launches:
        router.start(set_id, claim)  # agent-served labs' sets wait for an agent


def _standby_queue(engine: Engine, settings: Settings) -> list[QueueRow]:
    """The queue as a standby sees it: a scheduler rebuilt from the database, for reading."""
    from labq.service.queueview import rows

    with reading(engine) as repo:
        core = bridge.rebuild(repo, settings.scheduler())
    return rows(core, utcnow())


def _standby_forecasts(engine: Engine, settings: Settings) -> Mapping[int, SetForecast]:
    """The forecasts as a standby makes them: on a scheduler rebuilt from the database, with
    the predictions learnt from the history it keeps."""
    from labq.service.forecasting import forecasts

    with reading(engine) as repo:
        core = bridge.rebuild(repo, settings.scheduler())
        return forecasts(repo, core, utcnow())


def connection_limits(settings: Settings) -> ConnectionLimits:
    """What the server's HTTP protocol allows clients (``server.*`` settings)."""
    given = settings.server
    return ConnectionLimits(
        header_timeout=given.header_timeout,
        body_timeout=given.body_timeout,
        max_connections=given.max_connections,
        body_min_rate=given.body_min_rate,
        body_grace=given.body_grace,
        body_share=given.body_share,
        bodies_per_credential=given.bodies_per_credential,
    )


def serve(settings: Settings, url: str | None, host: str, port: int) -> None:
    """Run until interrupted."""
    import uvicorn

    from labq.webapp import create_app

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)  # its own chatter on every start
    os.umask(0o077)  # logs, settings and supervisor files are the server's user's alone
    wildcard = host in ("", "::") or host.strip("0.") == ""  # listening everywhere
    local = "127.0.0.1" if wildcard else host
    api_url = settings.server.public_url or f"http://{local}:{port}"
    limits = allow_descriptors(connection_limits(settings))
    server = assemble(settings, url, api_url=api_url)
    try:
        app = create_app(server.engine, settings, server.events, bell=server.bell)
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level="info",
            http=protocol_class(limits, Entrance(server.engine, utcnow)),
            backlog=accept_backlog(limits),
            timeout_keep_alive=settings.server.keep_alive,
        )
    finally:
        server.close()
