"""A libvirt hypervisor on another machine, reached over SSH: where its guests' files go and
how their SSH is reached.

A ``<guestrecipe>`` whose host recipe runs on a hypervisor becomes a VM there
(:class:`labq.dispatch.vms.guests.VmGuests`). The libvirt provider talks to the host's
libvirt over libvirt's own SSH transport (``qemu+libssh://``, the lab's SSH key and
known_hosts file: no host key is accepted blindly), and this class does the rest over an
SSH connection of labq's: it uploads the VM's kernel, initrd (with the VM's keys) and
seed disk into a directory of its own under ``dir`` on the host, makes its disk there
with the host's ``qemu-img``, tells whether the guest's forwarded SSH port greets on the
host's 127.0.0.1, reads the last lines of its console, and removes the directory again.
The guest's own SSH goes through the host (:class:`labq.domain.vms.Hop`).
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path, PurePosixPath
from typing import Final, TypeVar
from urllib.parse import quote

import asyncssh

from labq.dispatch.backends.ssh import SshError, connect
from labq.domain.vms import Hop
from labq.errors import ProviderError

_TIMEOUT: Final = 30.0
_CONSOLE_BYTES: Final = 4096
T = TypeVar("T")
Connection = asyncssh.SSHClientConnection


class Hypervisor:
    """The libvirt of ``hop`` (``session``: the login user's own daemon, else ``system``)
    with the VMs' files under ``dir`` there."""

    def __init__(self, hop: Hop, *, dir: str, session: bool = False) -> None:
        path = PurePosixPath(dir)
        if not path.is_absolute() or ".." in path.parts or len(path.parts) < 3:
            raise ProviderError(f"guests' dir {dir!r}: an absolute directory two levels deep")
        self.hop = hop
        self.dir = path
        self.session = session

    @property
    def uri(self) -> str:
        """libvirt's URI for the host: its libssh transport, with the same key and
        known_hosts file labq uses, and the host key checked."""
        hop = self.hop
        known = Path(hop.known_hosts or "~/.ssh/known_hosts").expanduser()
        params = [f"known_hosts={quote(str(known))}", "known_hosts_verify=normal"]
        if hop.identity_file:
            params += [f"keyfile={quote(hop.identity_file)}", "sshauth=privkey"]
        daemon = "session" if self.session else "system"
        return f"qemu+libssh://{quote(hop.user)}@{hop.host}:{hop.port}/{daemon}?{'&'.join(params)}"

    def kvm_usable(self) -> bool:
        """Whether the host's QEMU can use KVM (as :func:`labq.dispatch.vms.libvirt.
        kvm_usable` asks here: a ``/dev/kvm`` that is not PVM's)."""
        probe = "test -c /dev/kvm && ! test -e /sys/module/kvm_pvm"

        async def ask(conn: asyncssh.SSHClientConnection) -> bool:
            done = await conn.run(probe, check=False, timeout=_TIMEOUT)
            return bool(done.exit_status == 0)

        return self._session(ask, "look for KVM")

    def home(self, name: str) -> PurePosixPath:
        """The VM's directory on the host."""
        return self.dir / name

    def place(self, name: str, files: list[Path], disk_gb: int) -> PurePosixPath:
        """Upload ``files`` into the VM's directory on the host and make its blank qcow2
        disk (``disk.qcow2``) there; the directory."""
        home = self.home(name)
        q = shlex.quote(str(home))

        async def put(conn: asyncssh.SSHClientConnection) -> None:
            await _run(conn, f"rm -rf -- {q} && mkdir -p -m 700 -- {q}", f"make {home}")
            async with conn.start_sftp_client() as sftp:
                await sftp.put([str(f) for f in files], str(home))
            disk = shlex.quote(str(home / "disk.qcow2"))
            await _run(conn, f"qemu-img create -q -f qcow2 {disk} {disk_gb}G", "make the disk")

        self._session(put, f"place VM {name}'s files")
        return home

    def remove(self, name: str) -> None:
        """Remove the VM's directory on the host (nothing there is fine)."""
        q = shlex.quote(str(self.home(name)))

        async def rm(conn: asyncssh.SSHClientConnection) -> None:
            await _run(conn, f"rm -rf -- {q}", f"remove VM {name}'s files")

        self._session(rm, f"remove VM {name}'s files")

    def greets(self, port: int) -> bool:
        """Whether an SSH server greets on the host's 127.0.0.1:``port`` (the guest's, once
        it is up: QEMU's user-mode NAT accepts before the guest does)."""

        async def hello(conn: asyncssh.SSHClientConnection) -> bool:
            try:
                reader, writer = await conn.open_connection("127.0.0.1", port)
            except (asyncssh.Error, OSError):
                return False
            try:
                greeting = await asyncio.wait_for(reader.read(4), 3)
            except (TimeoutError, asyncssh.Error, OSError):
                return False
            finally:
                writer.close()
            return bytes(greeting).startswith(b"SSH-")

        try:
            return self._session(hello, "reach the guest")
        except ProviderError:
            return False  # the host did not answer this time: the caller polls again

    def console(self, name: str) -> str:
        """The end of the VM's serial console (``console.log`` in its directory), or ''."""
        path = shlex.quote(str(self.home(name) / "console.log"))

        async def tail(conn: asyncssh.SSHClientConnection) -> str:
            done = await conn.run(f"tail -c {_CONSOLE_BYTES} -- {path}", check=False)
            out = done.stdout
            return out if isinstance(out, str) and done.exit_status == 0 else ""

        try:
            return self._session(tail, "read the console")
        except ProviderError:
            return ""

    def _session(self, work: Callable[[Connection], Awaitable[T]], what: str) -> T:
        async def main() -> T:
            conn = await connect(self.hop, _TIMEOUT)
            try:
                return await work(conn)
            finally:
                conn.close()
                await conn.wait_closed()

        try:
            return asyncio.run(main())
        except (SshError, asyncssh.Error, OSError) as exc:
            raise ProviderError(f"cannot {what} on {self.hop.host}: {exc}") from None


async def _run(conn: asyncssh.SSHClientConnection, command: str, what: str) -> None:
    done = await conn.run(command, check=False, timeout=_TIMEOUT * 4)
    if done.exit_status != 0:
        err = done.stderr if isinstance(done.stderr, str) else ""
        tail = (err.strip().splitlines() or [f"exit code {done.exit_status}"])[-1]
        raise ProviderError(f"cannot {what}: {tail}")
