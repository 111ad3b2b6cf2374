"""The ``ssh`` backend: tasks run on a real machine over SSH (asyncssh).

Host keys are checked against a known_hosts file (the user's own by default),
never accepted blindly: a host whose key is unknown or changed is an error.

On the host, the workspace is a directory (``labq-workspace`` under the login
user's home by default). A task runs as ``/bin/sh`` with its process id as the
process group of everything it starts (sshd gives each session its own), so a
timeout or cancel ends the whole group with SIGTERM, then SIGKILL. The task's
variables travel over the session's standard input, never on a command line and
never in a file on the host; the input then stays open, and a watcher on the
host kills the task's group as soon as it closes — when the supervisor dies or
its connection breaks — so a set's tasks never outlive their supervisor there.
Output streams back into the local task log as it comes, with secrets masked;
``collect_logs`` copies the workspace's ``logs/`` directory back by SFTP.

The host needs a POSIX ``sh`` as the login shell of the user, and ``rm``,
``mkdir``, ``cat``, ``kill``, ``sleep`` — nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import signal
import tempfile
import threading
import time
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final, Protocol

import asyncssh

from labq.dispatch.fetch import copy_task
from labq.dispatch.logs import MaskedLog
from labq.dispatch.plan import SystemInfo, Workspace
from labq.dispatch.procs import DEFAULT_GRACE, Outcome
from labq.domain.vms import Hop, Vm
from labq.errors import LabqError

_TICK: Final = 0.05
_RETRY_EVERY: Final = 5.0

# Runs a task: records its pid (= its process group), reads its variables from
# stdin up to an end line, leaves a watcher on stdin, enters the workspace and
# the task's directory, then becomes the task. The session's stdin stays open for
# as long as the supervisor lives: when its connection goes (the supervisor was
# killed, the network broke), sshd closes the pipe and the watcher kills the
# task's whole process group, so nothing of the set runs on after its supervisor.
_TASK_WRAPPER: Final = (
    'pidf=$1; ws=$2; cwd=$3; end=$4; shift 4; echo $$ > "$pidf" || exit 125; '
    'vars=; while IFS= read -r line; do [ "$line" = "$end" ] && break; '
    'vars="$vars$line\n"; done; set -a; eval "$vars"; set +a; unset vars line; '
    # (a background list's stdin is /dev/null unless given: hand it the session's)
    "exec 3<&0; { while read -r _; do :; done; kill -KILL -$$; } <&3 >/dev/null 2>&1 & "
    'cd -- "$ws" || exit 125; LABQ_WORKSPACE=$(pwd -P); LABQ_LOG_DIR=$LABQ_WORKSPACE/logs; '
    'export LABQ_WORKSPACE LABQ_LOG_DIR; cd -- "$cwd" || exit 125; exec "$@" </dev/null 3<&-'
)
# Ends a task's process group: SIGTERM, then SIGKILL after $2 tenths of a second.
_GROUP_KILLER: Final = (
    'pidf=$1; n=$2; p=$(cat "$pidf" 2>/dev/null) || exit 0; rm -f -- "$pidf"; '
    '[ -n "$p" ] || exit 0; kill -TERM -"$p" 2>/dev/null || exit 0; i=0; '
    'while kill -0 -"$p" 2>/dev/null; do '
    'if [ "$i" -ge "$n" ]; then kill -KILL -"$p" 2>/dev/null; exit 0; fi; '
    "sleep 0.1; i=$((i+1)); done"
)


class SshError(LabqError):
    """A host that cannot be reached, refused us, or failed a command labq needed."""


class SshSettings(Protocol):
    """Anything with the connection settings, such as :class:`labq.config.SshBackend`."""

    @property
    def user(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def identity_file(self) -> str | None: ...
    @property
    def known_hosts(self) -> str | None: ...


@dataclass(frozen=True)
class SshOptions:
    """How to reach a lab's hosts and where their workspace is."""

    user: str = "root"
    port: int = 22
    identity_file: str | None = None
    known_hosts: str | None = None  # None: ~/.ssh/known_hosts; checking is never off
    workspace: str = "labq-workspace"  # relative to the user's home, or absolute
    connect_timeout: float = 30.0
    boot_timeout: float = 600.0  # how long provisioning waits for a host to answer
    command_timeout: float = 300.0  # for labq's own commands on the host
    via: Hop | None = None  # reached through this host (a guest, through its hypervisor)

    def __post_init__(self) -> None:
        path = PurePosixPath(self.workspace)
        parts = [p for p in path.parts if p != "/"]
        if (
            not parts
            or ".." in parts
            or "~" in self.workspace
            or len(parts) < (2 if path.is_absolute() else 1)
        ):
            raise SshError(f"workspace {self.workspace!r} is not a safe directory to wipe")

    @classmethod
    def from_settings(cls, ssh: SshSettings, workspace: str = "labq-workspace") -> SshOptions:
        """Options from a lab's ``ssh`` settings."""
        return cls(ssh.user, ssh.port, ssh.identity_file, ssh.known_hosts, workspace)

    @classmethod
    def for_vm(cls, vm: Vm, workspace: str = "labq-workspace") -> SshOptions:
        """Options for a VM a provider made: its port, its own key and its host key."""
        return cls(vm.user, vm.port, vm.identity_file, vm.known_hosts, workspace, via=vm.via)


class _TaskSession(asyncssh.SSHClientSession[bytes]):
    """Streams a task's output to its log and notes how it ended."""

    def __init__(self, log: MaskedLog) -> None:
        self.log = log
        self.exit_code: int | None = None
        self.exited = asyncio.Event()
        self.closed = asyncio.Event()

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        self.log.write(data)

    def exit_status_received(self, status: int) -> None:
        self.exit_code = status
        self.exited.set()

    def exit_signal_received(self, signal: str, core_dumped: bool, msg: str, lang: str) -> None:
        self.exit_code = -_signal_number(signal)
        self.exited.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.exited.set()
        self.closed.set()


def _signal_number(name: str) -> int:
    try:
        return int(signal.Signals[f"SIG{name}"])
    except KeyError:
        return 0


class SshBackend:
    """Systems reached over SSH at their ``address`` (or fqdn)."""

    def __init__(self, options: SshOptions | None = None, *, grace: float = DEFAULT_GRACE) -> None:
        self.options = options or SshOptions()
        self.grace = grace
        self.ws = self.options.workspace

    # -- connections ----------------------------------------------------------

    async def _connect(self, system: SystemInfo) -> asyncssh.SSHClientConnection:
        opts = self.options
        target = Hop(system.host, opts.port, opts.user, opts.identity_file, opts.known_hosts)
        if opts.via is None:
            return await connect(target, opts.connect_timeout)
        hop = await connect(opts.via, opts.connect_timeout)
        try:
            conn = await connect(target, opts.connect_timeout, tunnel=hop)
        except BaseException:
            hop.close()
            raise
        conn.set_tunnel(hop)  # closed with the connection made through it
        return conn

    async def _connect_when_up(
        self, system: SystemInfo, cancel_event: threading.Event
    ) -> asyncssh.SSHClientConnection:
        """Connect, retrying while the host boots (after a reimage) up to ``boot_timeout``."""
        deadline = time.monotonic() + self.options.boot_timeout
        while True:
            try:
                return await self._connect(system)
            except _UnreachableError:
                if time.monotonic() + _RETRY_EVERY > deadline or cancel_event.is_set():
                    raise
            await asyncio.sleep(_RETRY_EVERY)

    async def _check(self, conn: asyncssh.SSHClientConnection, command: str, what: str) -> str:
        try:
            done = await conn.run(command, check=False, timeout=self.options.command_timeout)
        except (asyncssh.Error, OSError, TimeoutError) as exc:
            raise SshError(f"cannot {what}: {exc or type(exc).__name__}") from None
        if done.exit_status != 0:
            err = done.stderr if isinstance(done.stderr, str) else ""
            raise SshError(f"cannot {what}: exit code {done.exit_status}: {err.strip()}")
        return done.stdout if isinstance(done.stdout, str) else ""

    # -- the backend interface ------------------------------------------------

    def provision(
        self, system: SystemInfo, workspace: Workspace, *, cancel_event: threading.Event
    ) -> None:
        """Wait for the host, make a fresh workspace, upload the pinned checkout."""
        asyncio.run(self._provision(system, workspace, cancel_event))

    async def _provision(
        self, system: SystemInfo, workspace: Workspace, cancel_event: threading.Event
    ) -> None:
        q = shlex.quote(self.ws)
        async with await self._connect_when_up(system, cancel_event) as conn:
            await self._check(conn, f"rm -rf -- {q} && mkdir -p -- {q}", "wipe the workspace")
            if workspace.checkout is not None:
                entries = [str(p) for p in sorted(workspace.checkout.iterdir())]
                try:
                    async with conn.start_sftp_client() as sftp:
                        if entries:
                            await sftp.put(entries, self.ws, recurse=True, preserve=True)
                except (asyncssh.Error, OSError) as exc:
                    raise SshError(f"cannot upload the workspace to {system.fqdn}: {exc}") from None
            await self._check(conn, f"mkdir -p -- {q}/logs {q}/.labq", "make the workspace")

    def put_task(self, system: SystemInfo, source: Path, relpath: str) -> None:
        """Upload ``source`` (without ``.git``) to ``relpath`` of the host's workspace."""
        with tempfile.TemporaryDirectory(prefix="labq-task-") as tmp:
            copy = Path(tmp) / "task"
            copy_task(source, copy)
            asyncio.run(self._put(system, copy, relpath))

    async def _put(self, system: SystemInfo, copy: Path, relpath: str) -> None:
        dest = f"{self.ws}/{relpath}"
        q = shlex.quote(dest)
        async with await self._connect(system) as conn:
            await self._check(conn, f"rm -rf -- {q} && mkdir -p -- {q}", "make the task directory")
            entries = [str(p) for p in sorted(copy.iterdir())]
            try:
                async with conn.start_sftp_client() as sftp:
                    if entries:
                        await sftp.put(entries, dest, recurse=True, preserve=True)
            except (asyncssh.Error, OSError) as exc:
                raise SshError(f"cannot upload the task to {system.fqdn}: {exc}") from None

    def locate_task(self, system: SystemInfo, relpath: str) -> str | None:
        """``./<relpath>`` if it is an executable file in the host's workspace."""
        return asyncio.run(self._locate(system, relpath))

    async def _locate(self, system: SystemInfo, relpath: str) -> str | None:
        path = shlex.quote(f"{self.ws}/{relpath}")
        async with await self._connect(system) as conn:
            done = await conn.run(
                f"test -f {path} && test -x {path}", timeout=self.options.command_timeout
            )
        return f"./{relpath}" if done.exit_status == 0 else None

    def run(
        self,
        system: SystemInfo,
        command: Sequence[str] | str,
        *,
        env: Mapping[str, str],
        cwd: str | None,
        timeout: float | None,
        log_path: Path,
        cancel_event: threading.Event,
        secrets: Collection[str] = (),
    ) -> Outcome:
        """Run on the host; end its whole process group on timeout or cancel."""
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        with MaskedLog(log_path, secrets) as log:
            return asyncio.run(self._run(system, argv, env, cwd, timeout, log, cancel_event))

    async def _run(
        self,
        system: SystemInfo,
        argv: list[str],
        env: Mapping[str, str],
        cwd: str | None,
        timeout: float | None,
        log: MaskedLog,
        cancel_event: threading.Event,
    ) -> Outcome:
        pidfile = f"{self.ws}/.labq/pid-{uuid.uuid4().hex}"
        end = f"labq-end-{uuid.uuid4().hex}"
        wrapper = ["exec", "/bin/sh", "-c", _TASK_WRAPPER, "labq-task"]
        remote = shlex.join([*wrapper, pidfile, self.ws, cwd or ".", end, *argv])
        variables = "".join(f"{k}={shlex.quote(v)}\n" for k, v in env.items()) + f"{end}\n"
        deadline = None if timeout is None else time.monotonic() + timeout
        timed_out = cancelled = False
        async with await self._connect(system) as conn:
            session = _TaskSession(log)
            chan, _ = await conn.create_session(lambda: session, remote, encoding=None)
            chan.write(variables.encode())  # no EOF: the open stdin is the task's lifeline
            while not session.exited.is_set():
                if cancel_event.is_set():
                    cancelled = True
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    timed_out = True
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(session.exited.wait(), _TICK)
            # also after a normal exit: whatever the task left running goes too
            await self._end_group(conn, pidfile)
            for event in (session.exited, session.closed):
                try:
                    await asyncio.wait_for(event.wait(), self.grace + 2)
                except TimeoutError:
                    break
            chan.close()
        return Outcome(session.exit_code, timed_out=timed_out, cancelled=cancelled)

    async def _end_group(self, conn: asyncssh.SSHClientConnection, pidfile: str) -> None:
        tenths = str(max(1, round(self.grace * 10)))
        killer = shlex.join(["/bin/sh", "-c", _GROUP_KILLER, "labq-kill", pidfile, tenths])
        await conn.run(killer, check=False, timeout=self.grace + self.options.command_timeout)

    def collect_logs(self, system: SystemInfo, dest: Path) -> None:
        """Copy the host's ``<workspace>/logs`` into ``dest`` by SFTP."""
        asyncio.run(self._collect(system, dest))

    async def _collect(self, system: SystemInfo, dest: Path) -> None:
        src = f"{self.ws}/logs"
        async with await self._connect(system) as conn, conn.start_sftp_client() as sftp:
            if await sftp.isdir(src) and set(await sftp.listdir(src)) - {".", ".."}:
                dest.parent.mkdir(parents=True, exist_ok=True)
                await sftp.get(src, str(dest), recurse=True, preserve=True)

    def cleanup(self, system: SystemInfo, *, log_dir: Path) -> None:
        """Remove the host's workspace (the lab's ``cleanup`` hook does the rest)."""
        asyncio.run(self._cleanup(system))

    async def _cleanup(self, system: SystemInfo) -> None:
        async with await self._connect(system) as conn:
            await self._check(conn, f"rm -rf -- {shlex.quote(self.ws)}", "remove the workspace")


class _UnreachableError(SshError):
    """The host did not answer (yet)."""


async def connect(
    hop: Hop, timeout: float, *, tunnel: asyncssh.SSHClientConnection | None = None
) -> asyncssh.SSHClientConnection:
    """An SSH connection to ``hop`` (through ``tunnel``: from that host), its host key
    checked against its known_hosts file; every failure one line (:class:`SshError`)."""
    where = f"{hop.user}@{hop.host}:{hop.port}"
    # always a file of ours: asyncssh's default would follow an ssh_config that
    # says "UserKnownHostsFile none", which turns checking off
    known_hosts = Path(hop.known_hosts or "~/.ssh/known_hosts").expanduser()
    if not known_hosts.is_file():
        raise SshError(f"ssh to {where}: known_hosts file {known_hosts} does not exist")
    try:
        return await asyncssh.connect(
            hop.host,
            port=hop.port,
            username=hop.user,
            known_hosts=str(known_hosts),
            client_keys=[hop.identity_file] if hop.identity_file else (),
            connect_timeout=timeout,
            tunnel=tunnel or (),
        )
    except asyncssh.HostKeyNotVerifiable as exc:
        raise SshError(
            f"ssh to {where}: host key not verified against known_hosts ({exc.reason}); "
            "add the host's key to known_hosts"
        ) from None
    except asyncssh.PermissionDenied:
        raise SshError(f"ssh to {where}: permission denied (check identity_file)") from None
    except (OSError, asyncssh.Error, TimeoutError) as exc:
        raise _UnreachableError(f"ssh to {where}: {exc or type(exc).__name__}") from None
