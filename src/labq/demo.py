"""``labq demo``: a whole labq on this machine, with a lab, systems and jobs to look at.

A fresh SQLite database in a directory of its own, the server (API, scheduler,
dispatcher) in this process, a first admin, the lab ``demo`` with four local
systems (workspaces under the directory), a pool with an access rule, and three
of the bundled examples adjusted to run locally. Everything after the admin is
done over the HTTP API, as a person would with ``labq``; it serves until Ctrl-C.
"""

from __future__ import annotations

import logging
import socket
import tempfile
import threading
import time
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import click

from labq.client import Client, Connection
from labq.config import Settings
from labq.errors import LabqError

if TYPE_CHECKING:
    from labq.server import Server

HOST: Final = "127.0.0.1"
LAB: Final = "demo"
POOL: Final = "fast"
GROUP: Final = "qe"
SYSTEMS: Final[list[dict[str, Any]]] = [
    {"fqdn": "demo-1.local", "attributes": {"memory_mb": 8192, "machine_type": "smithi"}},
    {"fqdn": "demo-2.local", "attributes": {"memory_mb": 8192, "machine_type": "smithi"}},
    {"fqdn": "demo-3.local", "attributes": {"memory_mb": 16384, "machine_type": "mira"}},
    {"fqdn": "demo-4.local", "attributes": {"memory_mb": 4096, "machine_type": "mira"}},
]
IN_POOL: Final = ("demo-1.local", "demo-3.local")
JOBS: Final = ("demo-hello.yaml", "demo-pair.yaml", "demo-teuthology.yaml")
START_SECONDS: Final = 30.0
STOP_SLACK_SECONDS: Final = 5.0  # past the dispatcher's grace: its SIGKILL has landed


def run_demo(*, port: int, directory: str | None) -> None:
    """Set everything up, print how to use it, and serve until interrupted."""
    import uvicorn

    from labq.api.app import create_app
    from labq.server import assemble
    from labq.store.bootstrap import first_admin

    _check_port(port)
    root = Path(directory or tempfile.mkdtemp(prefix="labq-demo-")).resolve()
    root.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{root / 'labq.db'}"
    if (root / "labq.db").exists():
        raise LabqError(f"{root} holds a labq database already: give the demo an empty --dir")
    settings = Settings(database=url, data_dir=str(root / "data"))
    logging.basicConfig(level=logging.WARNING, format="%(name)s %(levelname)s %(message)s")

    server = assemble(settings, url, api_url=f"http://{HOST}:{port}")
    token = first_admin(url, "admin", actor="labq demo")
    assert token is not None, "a fresh database has no users"
    app = create_app(server.engine, settings, server.service, bell=server.bell)
    web = uvicorn.Server(uvicorn.Config(app, host=HOST, port=port, log_level="warning"))
    thread = threading.Thread(target=web.run, name="labq-demo-http", daemon=True)
    base = f"http://{HOST}:{port}"
    try:
        thread.start()
        _wait_started(web, thread, port)
        with Client(Connection(base, token)) as client:
            jobs = populate(client)
        _announce(base, root, token, jobs)
        while thread.is_alive():
            thread.join(0.5)
    except KeyboardInterrupt:
        click.echo("\nlabq demo: stopping")
    finally:
        web.should_exit = True
        thread.join(10)
        _stop_what_it_started(server)
        server.close()
    click.echo(f"labq demo: stopped; its database and logs stay in {root}")


def _stop_what_it_started(server: Server) -> None:
    """Start nothing more, then stop every supervisor and wait until it has exited.

    ``labq server`` leaves supervisors running for the next leader to adopt; the
    demo has no next leader, so its supervisors end their tasks (as on a cancel),
    archive the logs and exit before it does. The dispatcher kills a supervisor
    that outlives its grace period.
    """
    if server.scheduler is not None:
        server.scheduler.stop()  # no set starts from here on
    dispatcher = server.dispatcher
    if dispatcher is None or not dispatcher.running():
        return
    running = dispatcher.running()
    sets = ", ".join(str(set_id) for set_id in running)
    click.echo(f"labq demo: stopping the supervisors of recipe sets {sets}")
    for set_id in running:
        dispatcher.stop(set_id)
    deadline = time.monotonic() + dispatcher.grace + STOP_SLACK_SECONDS
    while dispatcher.running() and time.monotonic() < deadline:
        time.sleep(0.1)


def _check_port(port: int) -> None:
    with socket.socket() as sock:
        try:
            sock.bind((HOST, port))
        except OSError as exc:
            raise LabqError(
                f"cannot listen on {HOST}:{port} ({exc.strerror}): try labq demo --port N"
            ) from None


def _wait_started(web: Any, thread: threading.Thread, port: int) -> None:
    deadline = time.monotonic() + START_SECONDS
    while not web.started:
        if not thread.is_alive():
            raise LabqError(f"the demo server did not start on {HOST}:{port}")
        if time.monotonic() > deadline:
            raise LabqError(f"the demo server did not start on {HOST}:{port} in time")
        time.sleep(0.05)


def example(name: str) -> bytes:
    """A bundled example job, from the installed package."""
    return resources.files("labq").joinpath("examples", name).read_bytes()


def populate(client: Client) -> list[int]:
    """The demo lab, its systems, pool, rule and group; then the sample jobs (their ids)."""
    client.post("/labs", {"name": LAB})
    client.post("/pools", {"name": POOL})
    client.post("/groups", {"name": GROUP})
    client.post(f"/groups/{GROUP}/members", {"user": "admin"})
    client.put(f"/pools/{POOL}/rules/{GROUP}", {"max_priority": "high"})
    for system in SYSTEMS:
        pools = [POOL] if system["fqdn"] in IN_POOL else []
        client.post("/systems", {**system, "lab": LAB, "pools": pools})
    return [
        int(client.submit(example(name), content_type="application/yaml", fmt="auto")["id"])
        for name in JOBS
    ]


def _announce(base: str, root: Path, token: str, jobs: list[int]) -> None:
    ids = ", ".join(str(j) for j in jobs)
    click.echo(
        f"""labq demo is running at {base} (web API under {base}/api/v1)
  lab {LAB!r}: {", ".join(s["fqdn"] for s in SYSTEMS)}; pool {POOL!r} open to group {GROUP!r}
  jobs {ids} submitted; the database, workspaces and logs are in {root}

The admin's token (shown only now):
  {token}

Try, in another shell:
  export LABQ_URL={base} LABQ_TOKEN={token}
  labq job list
  labq job show {jobs[-1]}
  labq job logs {jobs[0]}
  labq system list --lab {LAB}
  labq queue
  labq job submit --wait {resources.files("labq").joinpath("examples", JOBS[0])}

Press Ctrl-C to stop."""
    )
