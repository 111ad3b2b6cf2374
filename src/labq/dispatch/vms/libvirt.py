"""The ``libvirt`` VM provider: QEMU domains through libvirt (``libvirt-python``).

Each VM gets a directory of its own under ``state_dir`` (in labq's data directory):
a qcow2 disk (a copy-on-write overlay of the image, or a blank one when it boots a
kernel), an SSH key pair made for it (private key 0600, never logged), its host key
and a ``known_hosts`` file holding it, and its serial console's log, whose last lines
are the reason given when it does not come up. Its network is QEMU's user mode with
a free port of 127.0.0.1 forwarded to the guest's port 22: it needs no bridge, no
root and no firewall, and works in a container.

A kernel + initrd boot hands the guest its keys in a small cpio archive appended to
the initrd (``/etc/labq/authorized_keys``, ``/etc/labq/ssh_host_ed25519_key``, the
layout :mod:`labq.dispatch.vms.guest` reads); an image boot gets them on a NoCloud
seed disk (``genisoimage``) for cloud-init. Without a boot source the provider
boots the small guest built from this host's Debian packages.

Domains are transient and named ``labq-...``: ``list`` reports those libvirt runs
and the directories left behind, so a restarted server destroys its orphans.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path, PurePath
from typing import Any, Final
from xml.sax.saxutils import escape, quoteattr

from labq.dispatch.vms import guest, sources
from labq.dispatch.vms.cpio import Entry, write
from labq.dispatch.vms.hypervisor import Hypervisor
from labq.domain.vms import NAME_PREFIX, Vm, VmRequest, check_name
from labq.errors import ProviderError

_POLL: Final = 0.5
# marks a domain as made by the provider whose state_dir it names: two installations on one
# host never list or destroy each other's VMs
_META_NS: Final = "https://labq.invalid/vm/1"
_CONSOLE_LINES: Final = 3
BOOT_CACHE: Final = "boot-files"  # not labq-…: list() never takes it for a VM
HOSTS_DIR: Final = "hosts"  # not labq-… either: per host, the keys of guests made there
_REMOTE_PORTS: Final = (20000, 60000)  # a guest's forwarded port on a hypervisor's 127.0.0.1
_PORT_TRIES: Final = 5  # ports tried when one is taken there


def kvm_usable() -> bool:
    """Whether QEMU can run a stock kernel under KVM here.

    ``/dev/kvm`` backed by PVM (the ``kvm_pvm`` module some sandboxes use) only runs
    PVM-built guest kernels; a Debian kernel hangs there, so it counts as no KVM.
    """
    return Path("/dev/kvm").exists() and not Path("/sys/module/kvm_pvm").exists()


def _run(argv: list[str], what: str) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise ProviderError(f"cannot {what}: {argv[0]}: {exc.strerror}") from None
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise ProviderError(f"cannot {what}: {tail}")


def _remote_port() -> int:
    """A port for a guest's SSH on its hypervisor's 127.0.0.1 (free there, mostly)."""
    low, high = _REMOTE_PORTS
    return low + secrets.randbelow(high - low)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class LibvirtProvider:
    """VMs as libvirt domains on this host; the settings are plain values.

    ``domain_type`` is ``kvm``, ``qemu`` (TCG, software emulation) or ``auto`` (KVM
    where :func:`kvm_usable`). ``kernel``/``initrd``/``image`` are the default boot
    source for requests that name none; ``ssh_public_key`` is let in on every VM.
    With a ``hypervisor`` the VMs are made on that host instead (its libvirt over SSH,
    their files in its directory, their SSH through it); they boot a kernel and initrd.
    """

    kind = "libvirt"

    def __init__(
        self,
        *,
        state_dir: Path,
        uri: str = "qemu:///session",
        domain_type: str = "auto",
        kernel: str | None = None,
        initrd: str | None = None,
        image: str | None = None,
        kernel_args: str = "",
        user: str = "root",
        ssh_public_key: str | None = None,
        hypervisor: Hypervisor | None = None,
    ) -> None:
        if domain_type not in ("auto", "kvm", "qemu"):
            raise ProviderError(f"libvirt provider: domain_type {domain_type!r}: kvm, qemu or auto")
        try:
            import libvirt  # an optional extra: labq[vms]
        except ImportError:
            raise ProviderError(
                "the libvirt provider needs libvirt-python: pip install 'labq[vms]'"
            ) from None
        self._libvirt: Any = libvirt
        self.state_dir = state_dir
        self.hypervisor = hypervisor
        self.uri = uri if hypervisor is None else hypervisor.uri
        if domain_type == "auto":
            usable = kvm_usable() if hypervisor is None else hypervisor.kvm_usable()
            domain_type = "kvm" if usable else "qemu"
        self.domain_type = domain_type
        self.kernel, self.initrd, self.image = kernel, initrd, image
        self.kernel_args = kernel_args
        self.user = user
        self.ssh_public_key = ssh_public_key

    # -- libvirt --------------------------------------------------------------

    @contextlib.contextmanager
    def _conn(self) -> Iterator[Any]:
        libvirt = self._libvirt
        libvirt.registerErrorHandler(lambda _ctx, _err: None, None)  # no stderr chatter
        try:
            conn = libvirt.open(self.uri)
        except libvirt.libvirtError as exc:
            raise ProviderError(f"libvirt {self.uri}: {exc.get_error_message()}") from None
        try:
            yield conn
        finally:
            conn.close()

    def _domain(self, conn: Any, name: str) -> Any | None:
        try:
            return conn.lookupByName(name)
        except self._libvirt.libvirtError as exc:
            if exc.get_error_code() == self._libvirt.VIR_ERR_NO_DOMAIN:
                return None
            raise ProviderError(f"libvirt: {name}: {exc.get_error_message()}") from None

    # -- the provider interface -------------------------------------------------

    def _ours(self, domain: Any) -> bool:
        try:
            meta = domain.metadata(self._libvirt.VIR_DOMAIN_METADATA_ELEMENT, _META_NS, 0)
        except self._libvirt.libvirtError:
            return False
        return f"<state_dir>{escape(str(self.state_dir))}</state_dir>" in str(meta)

    def list(self) -> list[str]:
        """This provider's domains named ``labq-...`` and VM directories left, sorted."""
        with self._conn() as conn:
            names = {d.name() for d in conn.listAllDomains(0) if self._ours(d)}
        if self.state_dir.is_dir():
            names |= {p.name for p in self.state_dir.iterdir() if p.is_dir()}
        return sorted(n for n in names if n.startswith(NAME_PREFIX))

    def create(self, request: VmRequest) -> Vm:
        """Make the VM's files and start its domain; on failure remove all of it."""
        with self._conn() as conn:
            taken = self._domain(conn, request.name) is not None
        if taken or (self.state_dir / request.name).exists():
            raise ProviderError(f"VM {request.name} exists already")
        home = self.state_dir / request.name
        home.mkdir(parents=True, mode=0o700)
        try:
            port = self._start(request, home)
        except BaseException:
            self.destroy(request.name)
            raise
        return Vm(
            request.name,
            "127.0.0.1",
            port,
            self.user,
            self.kind,
            identity_file=str(home / "id_ed25519"),
            known_hosts=str(home / "known_hosts"),
            via=None if self.hypervisor is None else self.hypervisor.hop,
        )

    def _start(self, request: VmRequest, home: Path) -> int:
        """Make the VM's files and start its domain: the port its SSH is forwarded from.
        On a hypervisor a port chosen at random may be taken there: the next is tried."""
        for attempt in range(1, _PORT_TRIES + 1):
            port = _free_port() if self.hypervisor is None else _remote_port()
            xml = self._prepare(request, home, port)
            with self._conn() as conn:
                try:
                    conn.createXML(xml, 0)
                    return port
                except self._libvirt.libvirtError as exc:
                    message = exc.get_error_message()
                    taken = self.hypervisor is not None and "forward" in message
                    if not taken or attempt == _PORT_TRIES:
                        raise ProviderError(
                            f"VM {request.name}: libvirt refused it: {message}"
                        ) from None
            shutil.rmtree(home)  # made again for the next port
            home.mkdir(mode=0o700)
        raise AssertionError("unreachable: the last try raises")

    def wait_reachable(self, vm: Vm, deadline: float) -> None:
        """Poll the VM's SSH port until it says ``SSH-``; its console tells why not."""
        while True:
            if self._greets(vm):
                return
            if not self._running(vm.name):
                raise ProviderError(f"VM {vm.name} stopped while booting{self._told(vm.name)}")
            if time.monotonic() >= deadline:
                raise ProviderError(
                    f"VM {vm.name}: SSH did not answer in time{self._told(vm.name)}"
                )
            time.sleep(_POLL)

    def _greets(self, vm: Vm) -> bool:
        if self.hypervisor is None:
            return _ssh_answers(vm.address, vm.port)
        return self.hypervisor.greets(vm.port)

    def _told(self, name: str) -> str:
        """``; console: <its last lines>`` when the VM's console said anything."""
        if self.hypervisor is None:
            try:
                text = (self.state_dir / name / "console.log").read_bytes().decode(errors="replace")
            except OSError:
                return ""
        else:
            text = self.hypervisor.console(name)
        return _last_lines(text)

    def _running(self, name: str) -> bool:
        with self._conn() as conn:
            domain = self._domain(conn, name)
            try:
                return domain is not None and bool(domain.isActive())
            except self._libvirt.libvirtError:  # a transient domain ends and is gone
                return False

    def destroy(self, name: str) -> None:
        """Stop the domain (if any, and ours) and remove the VM's directory; nothing there
        is fine."""
        check_name(name)
        with self._conn() as conn:
            domain = self._domain(conn, name)
            if domain is not None and self._ours(domain):
                with contextlib.suppress(self._libvirt.libvirtError):  # it ended meanwhile
                    domain.destroy()
                with contextlib.suppress(self._libvirt.libvirtError):  # transient: gone
                    domain.undefine()
        if self.hypervisor is not None:
            self.hypervisor.remove(name)
        shutil.rmtree(self.state_dir / name, ignore_errors=True)

    # -- a VM's files -------------------------------------------------------------

    def _prepare(self, request: VmRequest, home: Path, port: int) -> str:
        """The VM's keys, disk and boot files in ``home``; its domain XML."""
        name = request.name
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f",
              str(home / "id_ed25519")], f"make VM {name}'s key")  # fmt: skip
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f",
              str(home / "host_ed25519")], f"make VM {name}'s host key")  # fmt: skip
        host_pub = " ".join((home / "host_ed25519.pub").read_text().split()[:2])
        (home / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub}\n")
        keys = [(home / "id_ed25519.pub").read_text().strip()]
        keys += [k.strip() for k in (request.ssh_public_key, self.ssh_public_key) if k]
        authorized = "".join(f"{k}\n" for k in keys)
        disk = home / "disk.qcow2"
        size = f"{request.size.disk_gb}G"
        image = request.image or (None if request.kernel else self.image)
        kernel, initrd, args = request.kernel, request.initrd, request.kernel_args
        if image is None and kernel is None:
            kernel, initrd, args = self.kernel, self.initrd, self.kernel_args
            if kernel is None:
                built = guest.build()
                kernel, initrd, args = str(built.kernel), str(built.initrd), guest.KERNEL_ARGS
        boot = ""
        extra_disk = ""
        where: PurePath = home  # the VM's files as its domain names them
        if image is not None and self.hypervisor is not None:
            raise ProviderError(
                f"VM {name}: a hypervisor over SSH boots a kernel and initrd, not an image"
            )
        if image is not None:
            backing = str(self._boot_file(name, "image", image).resolve())
            _run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", _format(backing), "-b",
                  backing, str(disk), size], f"make VM {name}'s overlay")  # fmt: skip
            seed = self._seed(home, name, authorized)
            extra_disk = _disk_xml(seed, "raw", "vdb", readonly=True)
        else:
            assert kernel is not None  # VmRequest checks: both or none
            assert initrd is not None
            initrd_file = self._boot_file(name, "initrd", initrd)
            _with_keys(initrd_file, home / "initrd", authorized, home / "host_ed25519")
            shutil.copyfile(self._boot_file(name, "kernel", kernel), home / "kernel")
            if self.hypervisor is None:
                _run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), size],
                     f"make VM {name}'s disk")  # fmt: skip
            else:  # the disk is made there
                files = [home / "kernel", home / "initrd"]
                where = self.hypervisor.place(name, files, request.size.disk_gb)
            cmdline = f"{args} labq.hostname={name}".strip()
            boot = (
                f"<kernel>{escape(str(where / 'kernel'))}</kernel>"
                f"<initrd>{escape(str(where / 'initrd'))}</initrd>"
                f"<cmdline>{escape(cmdline)}</cmdline>"
            )
        return _domain_xml(
            name=name,
            state_dir=self.state_dir,
            kind=self.domain_type,
            vcpus=request.size.vcpus,
            memory_mb=request.size.memory_mb,
            boot=boot,
            disks=_disk_xml(where / "disk.qcow2", "qcow2", "vda") + extra_disk,
            console=where / "console.log",
            port=port,
        )

    def _boot_file(self, name: str, what: str, location: str) -> Path:
        """A path to ``location``: a tree's file over HTTP is downloaded into the boot
        cache (:mod:`labq.dispatch.vms.sources`) beside the VMs' directories."""
        try:
            return sources.local_copy(location, self.state_dir / BOOT_CACHE)
        except ProviderError as exc:
            raise ProviderError(f"VM {name}: {what}: {exc}") from None

    def _seed(self, home: Path, name: str, authorized: str) -> Path:
        """A cloud-init NoCloud seed: the keys for an image's first boot."""
        seed = home / "seed"
        seed.mkdir()
        keys = "".join(f"      - {k}\n" for k in authorized.splitlines())
        (seed / "meta-data").write_text(f"instance-id: {name}\nlocal-hostname: {name}\n")
        (seed / "user-data").write_text(
            f"#cloud-config\ndisable_root: false\nusers:\n  - name: {self.user}\n"
            f"    ssh_authorized_keys:\n{keys}"
        )
        iso = home / "seed.iso"
        _run(["genisoimage", "-quiet", "-output", str(iso), "-volid", "cidata", "-joliet",
              "-rock", str(seed / "user-data"), str(seed / "meta-data")],
             f"make VM {name}'s seed disk")  # fmt: skip
        return iso


def _format(image: str) -> str:
    with open(image, "rb") as f:
        return "qcow2" if f.read(4) == b"QFI\xfb" else "raw"


def _with_keys(initrd: Path, dest: Path, authorized: str, host_key: Path) -> None:
    """``initrd`` with an archive of the VM's keys appended (the kernel unpacks both)."""
    with dest.open("wb") as out:
        with initrd.open("rb") as base:
            shutil.copyfileobj(base, out)
        out.write(b"\0" * (-out.tell() % 4))
        write(
            out,
            [
                Entry.directory("etc"),
                Entry.directory(guest.KEYS_DIR),
                Entry.file(f"{guest.KEYS_DIR}/authorized_keys", authorized.encode()),
                Entry.file(f"{guest.KEYS_DIR}/ssh_host_ed25519_key", host_key.read_bytes(), 0o600),
            ],
        )
    dest.chmod(0o600)


def _ssh_answers(address: str, port: int) -> bool:
    """Whether an SSH server greets us there (user-mode NAT accepts before the guest does)."""
    try:
        with socket.create_connection((address, port), timeout=2) as s:
            s.settimeout(3)
            return s.recv(4).startswith(b"SSH-")
    except OSError:
        return False


def _last_lines(text: str) -> str:
    """``; console: <its last printable lines>``, or '' when there are none."""
    lines = [ln.strip() for ln in text.replace("\r", "\n").splitlines() if ln.strip()]
    lines = [ln for ln in lines if ln.isprintable()][-_CONSOLE_LINES:]
    return f"; console: {' | '.join(lines)}" if lines else ""


def _disk_xml(path: PurePath, fmt: str, target: str, *, readonly: bool = False) -> str:
    return (
        f"<disk type='file' device='disk'><driver name='qemu' type='{fmt}'/>"
        f"<source file={quoteattr(str(path))}/><target dev='{target}' bus='virtio'/>"
        f"{'<readonly/>' if readonly else ''}</disk>"
    )


def _domain_xml(
    *,
    name: str,
    state_dir: Path,
    kind: str,
    vcpus: int,
    memory_mb: int,
    boot: str,
    disks: str,
    console: PurePath,
    port: int,
) -> str:
    # user-mode networking through QEMU's own arguments: libvirt's <interface type='user'>
    # forwards ports only with passt, which a container rarely has
    # QEMU runs as whoever runs labq (not libvirt's own user): the VM's files stay private
    netdev = f"user,id=labqnet,hostfwd=tcp:127.0.0.1:{port}-:22"
    return f"""<domain type='{kind}' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>{escape(name)}</name>
  <metadata><labq:vm xmlns:labq='{_META_NS}'>
    <state_dir>{escape(str(state_dir))}</state_dir>
  </labq:vm></metadata>
  <memory unit='MiB'>{memory_mb}</memory>
  <vcpu>{vcpus}</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type>{boot}<boot dev='hd'/></os>
  <features><acpi/><apic/></features>
  <on_poweroff>destroy</on_poweroff><on_reboot>destroy</on_reboot><on_crash>destroy</on_crash>
  <devices>
    {disks}
    <serial type='file'><source path={quoteattr(str(console))}/><target port='0'/></serial>
    <memballoon model='none'/>
  </devices>
  <seclabel type='static' model='dac' relabel='no'>
    <label>+{os.getuid()}:+{os.getgid()}</label>
  </seclabel>
  <qemu:commandline>
    <qemu:arg value='-netdev'/><qemu:arg value={quoteattr(netdev)}/>
    <qemu:arg value='-device'/><qemu:arg value='virtio-net-pci,netdev=labqnet,romfile=,addr=0x1e'/>
  </qemu:commandline>
</domain>"""
