"""``labq server``: the HTTP API, the scheduler and the dispatcher in one process."""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass

from sqlalchemy.engine import Engine

from labq.config import Settings
from labq.dispatch.dispatcher import Dispatcher
from labq.service.loop import SchedulerService
from labq.store import database, reading

log = logging.getLogger("labq.server")


@dataclass
class Server:
    """The parts of a running server, for the command and for tests."""

    url: str
    engine: Engine
    service: SchedulerService
    dispatcher: Dispatcher

    def close(self) -> None:
        """Stop scheduling; supervisors keep running and are adopted on the next start."""
        self.service.stop()
        self.dispatcher.shutdown()
        self.engine.dispose()


def assemble(settings: Settings, url: str | None = None) -> Server:
    """Upgrade the database, rebuild the scheduler, adopt or start supervisors."""
    url = url or settings.database or database.default_url()
    database.upgrade(url)
    engine = database.make_engine(url)
    holder: list[SchedulerService] = []
    dispatcher = Dispatcher(
        url, settings, lambda set_id, code: holder[0].set_finished(set_id, code)
    )
    service = SchedulerService(engine, settings, dispatcher)
    holder.append(service)
    service.start()
    _adopt(engine, dispatcher, service)
    return Server(url, engine, service, dispatcher)


def _adopt(engine: Engine, dispatcher: Dispatcher, service: SchedulerService) -> None:
    """Supervisors of this host that outlived the last server are watched again;
    started sets nobody supervises are handed to new supervisors."""
    here = socket.gethostname()
    with reading(engine) as repo:
        supervised = repo.supervised_sets()
        unsupervised = repo.unsupervised_sets()
    mine = {set_id: pid for set_id, pid, host in supervised if host in (None, here)}
    alive = set(dispatcher.adopt(mine))
    for set_id in sorted(set(mine) - alive):
        log.info("set %s: its supervisor is gone", set_id)
    for set_id in unsupervised:
        dispatcher.start(set_id)
    del service  # the dispatcher reports ends to the service through its callback


def serve(settings: Settings, url: str | None, host: str, port: int) -> None:
    """Run until interrupted."""
    import uvicorn

    from labq.api.app import create_app

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    server = assemble(settings, url)
    try:
        app = create_app(server.engine, settings, server.service)
        uvicorn.run(app, host=host, port=port, log_level="info")
    finally:
        server.close()
