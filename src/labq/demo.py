"""``labq demo``: a whole labq on this machine, with a lab, systems and jobs to look at.

A fresh SQLite database in a directory of its own, the server (API, web UI,
scheduler, dispatcher) in this process, a first admin, the lab ``demo`` with four
local systems (workspaces under the directory), a pool with an access rule, and
three of the bundled examples adjusted to run locally. Everything after the admin
is done over the HTTP API, as a person would with ``labq``.

It serves until SIGINT or SIGTERM, and then leaves nothing behind: no set starts
any more, every supervisor ends its tasks and exits, and a temporary directory it
made is removed (unless ``--keep``).
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from types import FrameType
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
FIRST_TASK: Final = "hello"  # demo-hello.yaml's first task: its output is what `job logs` shows
START_SECONDS: Final = 30.0
STOP_SLACK_SECONDS: Final = 5.0  # past the dispatcher's grace: its SIGKILL has landed
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)


def run_demo(*, port: int, directory: str | None, keep: bool = False, vms: bool = False) -> None:
    """Set everything up, print how to use it, and serve until SIGINT or SIGTERM.

    A directory the demo made is removed at the end unless ``keep``; one it was
    given (``--dir``) is the caller's and stays. ``vms``: the lab has a libvirt VM
    provider and a job that needs a VM (:mod:`labq.demovms`).
    """
    _check_port(port)
    if vms:
        from labq.demovms import check_libvirt

        with tempfile.TemporaryDirectory(prefix="labq-demo-probe-") as probe:
            check_libvirt(Path(probe) / "vms")
    if directory is not None and (Path(directory) / "labq.db").exists():
        raise LabqError(f"{directory} holds a labq database already: give the demo an empty --dir")
    root = Path(directory or tempfile.mkdtemp(prefix="labq-demo-")).resolve()
    root.mkdir(parents=True, exist_ok=True)
    removes = directory is None and not keep
    stop = Stop()
    try:
        with stop.on_signals():
            _serve(root, port, stop, removes=removes, vms=vms)
    finally:
        if removes:
            shutil.rmtree(root, ignore_errors=True)
        if root.exists():
            click.echo(f"labq demo: stopped; its database and logs stay in {root}")
        else:
            click.echo(f"labq demo: stopped; removed {root}")


class Stop(threading.Event):
    """Set by SIGINT or SIGTERM (or by a caller in another thread)."""

    signal_name: str | None = None

    @contextmanager
    def on_signals(self) -> Iterator[None]:
        """Install the handlers whatever they were: a shell that starts the demo in the
        background without job control has SIGINT ignored, and Python's default for
        SIGTERM would leave the supervisors running on for their leases."""
        if threading.current_thread() is not threading.main_thread():
            yield  # only the main thread may set handlers
            return
        before = {number: signal.signal(number, self._handle) for number in STOP_SIGNALS}
        try:
            yield
        finally:
            for number, handler in before.items():
                signal.signal(number, handler)

    def _handle(self, number: int, _frame: FrameType | None) -> None:
        # no click.echo here: the main thread may be inside a write to the same stream
        if self.is_set():
            os.write(2, b"labq demo: already stopping; supervisors are ending their tasks\n")
            return
        self.signal_name = signal.Signals(number).name
        self.set()


def _serve(root: Path, port: int, stop: Stop, *, removes: bool, vms: bool) -> None:
    """Start the server, fill the lab, announce, and serve until ``stop``; then stop
    the web server and everything the scheduler started."""
    import uvicorn

    from labq.server import assemble
    from labq.store.bootstrap import first_admin
    from labq.webapp import create_app

    url = f"sqlite:///{root / 'labq.db'}"
    settings = Settings(database=url, data_dir=str(root / "data"))
    if vms:
        from labq.demovms import lab_settings

        settings = settings.model_copy(update={"labs": lab_settings(LAB)})
    logging.basicConfig(level=logging.WARNING, format="%(name)s %(levelname)s %(message)s")
    base = f"http://{HOST}:{port}"
    server = assemble(settings, url, api_url=base)
    try:
        token = first_admin(url, "admin", actor="labq demo")
        assert token is not None, "a fresh database has no users"
        app = create_app(server.engine, settings, server.service, bell=server.bell)
        web = uvicorn.Server(uvicorn.Config(app, host=HOST, port=port, log_level="warning"))
        thread = threading.Thread(target=web.run, name="labq-demo-http", daemon=True)
        thread.start()
        try:
            if _wait_started(web, thread, port, stop):
                with Client(Connection(base, token)) as client:
                    jobs = populate(client)
                    _wait_ended(client, jobs, stop)
                    extra = _vm_part(client, settings.data_path(), stop) if vms else None
                if not stop.is_set():
                    text = announcement(base, root, token, jobs, removes=removes, vms=extra)
                    click.echo(text)
            while thread.is_alive() and not stop.wait(0.5):
                pass
            click.echo(f"\nlabq demo: {stop.signal_name or 'the web server ended'}: stopping")
        finally:
            web.should_exit = True
            thread.join(10)
    finally:
        _stop_what_it_started(server)
        server.close()


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


def _wait_started(web: Any, thread: threading.Thread, port: int, stop: Stop) -> bool:
    """True once the web server listens, False when stopped before."""
    deadline = time.monotonic() + START_SECONDS
    while not web.started:
        if not thread.is_alive():
            raise LabqError(f"the demo server did not start on {HOST}:{port}")
        if time.monotonic() > deadline:
            raise LabqError(f"the demo server did not start on {HOST}:{port} in time")
        if stop.wait(0.05):
            return False
    return True


def example(name: str) -> bytes:
    """A bundled example job, from the installed package."""
    return resources.files("labq").joinpath("examples", name).read_bytes()


ENDED: Final = frozenset({"completed", "cancelled", "aborted"})


def populate(client: Client) -> list[int]:
    """The demo lab, its systems, pool, rule and group; then the sample jobs (their ids)."""
    if LAB not in {lab["name"] for lab in client.get("/labs")["labs"]}:  # with VMs: made
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


def _vm_part(client: Client, data_dir: Path, stop: Stop) -> tuple[str, list[str]]:
    """Submit the job that needs a VM and watch it to the end; the announcement's lines
    about it and the commands to look."""
    from labq.demovms import Watch, commands, summary, vm_job

    document = vm_job(len(SYSTEMS), GROUP).encode()
    job_id = int(client.submit(document, content_type="application/yaml", fmt="auto")["id"])
    click.echo(f"labq demo: job {job_id} needs a VM; watching it (this takes a few minutes)")
    watch = Watch(data_dir, click.echo)
    watch.until_done(client, job_id, stop.wait)
    return summary(watch, job_id), commands(watch, job_id)


def _wait_ended(client: Client, jobs: list[int], stop: Stop, *, limit: float = 60.0) -> None:
    """Until the sample jobs have ended (a few seconds; ``limit`` at most): the printed
    commands read their logs, which a task that has not run yet does not have."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and not stop.wait(0.2):
        if all(client.get(f"/jobs/{j}")["state"] in ENDED for j in jobs):
            return


def announcement(
    base: str,
    root: Path,
    token: str,
    jobs: list[int],
    *,
    removes: bool,
    vms: tuple[str, list[str]] | None = None,
) -> str:
    """What the demo prints once it runs: where, how to log in, and commands that work as
    pasted into a new shell (its first line puts this ``labq`` on PATH). ``vms``: the
    lines about the VM job and its commands (``--vms``)."""
    hello = resources.files("labq").joinpath("examples", JOBS[0])
    ending = f"removes {root}" if removes else f"keeps {root}"
    vm_lines, vm_commands = vms if vms is not None else ("", [])
    vm = f"\n  Lab {LAB!r} also makes one small VM on demand (libvirt):\n{vm_lines}" if vms else ""
    more = "".join(f"\n  {command}" for command in vm_commands)
    return f"""labq demo is running.

Web UI: {base}/ui/ (the HTTP API is under {base}/api/v1)
  Log in as admin by pasting the token below into the login page's token field.
  Lab {LAB!r}: {", ".join(s["fqdn"] for s in SYSTEMS)}, local systems whose tasks run
  on this host (local backend); pool {POOL!r} is open to group {GROUP!r}.
  Jobs {", ".join(str(j) for j in jobs)} are submitted. Database, workspaces and logs: {root}{vm}

The admin's token (shown only now):
  {token}

Try, in another shell (paste the lines as they are; the first one puts labq on PATH
and tells it where the server is and the token):
  export {path_setting()}LABQ_URL={base} LABQ_TOKEN={token}
  labq job list
  labq job show {jobs[-1]}
  labq job logs {jobs[0]} {FIRST_TASK}
  labq job logs {jobs[0]}
  labq system list --lab {LAB}
  labq queue
  labq job submit --wait {shlex.quote(str(hello))}{more}

'labq job logs {jobs[0]} {FIRST_TASK}' prints what task {FIRST_TASK!r} wrote; without a task it
lists the job's log files, any of which it prints by name.

Press Ctrl-C to stop: the demo ends the tasks still running and {ending}."""


def path_setting() -> str:
    """``PATH=<the directory of this labq>:"$PATH" `` for a shell that lacks it, or
    nothing when this labq is not a file we can name (then it is on PATH already)."""
    found = executable()
    if found is None:
        return ""
    return f'PATH={shlex.quote(str(found.parent))}:"$PATH" '


def executable() -> Path | None:
    """The ``labq`` command this process runs as, with an absolute path."""
    ran = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if ran is not None and ran.name == "labq" and ran.is_file():
        return Path(os.path.abspath(ran))
    beside = Path(sys.executable).parent / "labq"  # the console script of this interpreter
    if beside.is_file():
        return Path(os.path.abspath(beside))
    found = shutil.which("labq")
    return Path(os.path.abspath(found)) if found else None
