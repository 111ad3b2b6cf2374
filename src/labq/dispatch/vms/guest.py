"""A small bootable guest made from this host's Debian packages, with no image download.

The Debian kernel (``linux-image-amd64``) and an initramfs written here: busybox
(``busybox-static``) for a shell and DHCP, dropbear (``dropbear-bin``) for SSH and
OpenSSH's ``sftp-server`` (``openssh-sftp-server``) for file copies, with the shared
libraries they need, and the kernel modules of a virtio network card. It boots to
SSH in a second or two on KVM. It is the libvirt provider's default boot source,
and what the tests, ``bench/vms.py`` and ``labq demo --vms`` boot.

Its ``/init`` reads the keys a provider appends to the initrd (see :data:`KEYS_DIR`):
``authorized_keys`` for root and an OpenSSH ``ssh_host_ed25519_key``. It is built
once per machine into the user's cache directory, keyed by the packages' versions.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import platformdirs

from labq.dispatch.vms.cpio import Entry, write
from labq.errors import ProviderError

KEYS_DIR: Final = "etc/labq"  # in the guest: authorized_keys, ssh_host_ed25519_key
PACKAGES: Final = ("busybox-static", "dropbear-bin", "openssh-sftp-server")
_BUILD: Final = "1"  # bump when the layout below changes: old caches are then unused
_PROGRAMS: Final = {  # on the host -> in the guest
    "/usr/sbin/dropbear": "usr/sbin/dropbear",
    "/usr/bin/dropbearconvert": "usr/bin/dropbearconvert",
    "/usr/lib/openssh/sftp-server": "usr/lib/sftp-server",  # where dropbear looks for it
}
_MODULES: Final = ("virtio_pci", "virtio_net")

_INIT: Final = """#!/bin/sh
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mkdir -p /dev/pts; mount -t devpts devpts /dev/pts
for m in $(cat /etc/modules-order); do insmod "/lib/modules/$m"; done
name=$(sed -n 's/.*labq.hostname=\\([^ ]*\\).*/\\1/p' /proc/cmdline); hostname "${name:-guest}"
ip link set lo up; ip link set eth0 up
udhcpc -i eth0 -s /etc/udhcpc.script -q -n -t 20 -T 1 || echo "labq-guest: no DHCP answer"
mkdir -p -m 700 /root/.ssh /etc/dropbear
cat /etc/labq/authorized_keys > /root/.ssh/authorized_keys 2>/dev/null
chmod 600 /root/.ssh/authorized_keys
dropbearconvert openssh dropbear /etc/labq/ssh_host_ed25519_key \\
    /etc/dropbear/dropbear_ed25519_host_key >/dev/null 2>&1 || echo "labq-guest: no host key"
dropbear -r /etc/dropbear/dropbear_ed25519_host_key -s -p 22 && echo "labq-guest: ssh is up"
"""
_UDHCPC: Final = """#!/bin/sh
case "$1" in
bound|renew)
    ip addr flush dev "$interface"; ip addr add "$ip/${mask:-24}" dev "$interface"
    for r in $router; do ip route add default via "$r" dev "$interface"; break; done
    for d in $dns; do echo "nameserver $d"; done > /etc/resolv.conf ;;
esac
"""
_INITTAB: Final = "::sysinit:/etc/rc.labq\n::ctrlaltdel:/bin/reboot\n::shutdown:/bin/sync\n"


@dataclass(frozen=True)
class Guest:
    """A built guest: boot its ``kernel`` with its ``initrd`` and :data:`KERNEL_ARGS`."""

    kernel: Path
    initrd: Path


KERNEL_ARGS: Final = "console=ttyS0 panic=-1 quiet"


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise ProviderError(f"test guest: cannot run {argv[0]}: {exc.strerror}") from None
    if done.returncode != 0:
        raise ProviderError(f"test guest: {' '.join(argv)}: {done.stderr.strip()}")
    return done.stdout


def _kernel() -> tuple[Path, str]:
    """The newest Debian kernel in /boot and its release."""
    found = sorted(Path("/boot").glob("vmlinuz-*"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise ProviderError("test guest: no kernel in /boot (apt-get install linux-image-amd64)")
    kernel = found[-1]
    return kernel, kernel.name.removeprefix("vmlinuz-")


def _versions(release: str) -> str:
    """The versions of the packages the guest is made of (its cache key)."""
    wanted = [f"linux-image-{release}", *PACKAGES]
    out = _run(["dpkg-query", "-W", "-f", "${Package}=${Version} ${Status}\\n", *wanted])
    missing = [line.split("=")[0] for line in out.splitlines() if "installed" not in line]
    if missing:
        raise ProviderError(f"test guest: packages not installed: {' '.join(missing)}")
    return out


def _libraries(programs: list[str]) -> list[str]:
    """The shared libraries (and the loader) ``programs`` need, by ``ldd``."""
    libs: set[str] = set()
    for program in programs:
        for line in _run(["ldd", program]).splitlines():
            match = re.search(r"(/\S+) \(0x", line)
            if match:
                libs.add(match.group(1))
    return sorted(libs)


def _modules(release: str) -> list[str]:
    """The modules of a virtio NIC, dependencies first, relative to the module tree."""
    tree = Path("/lib/modules") / release
    deps: dict[str, list[str]] = {}
    for line in (tree / "modules.dep").read_text().splitlines():
        module, _, needs = line.partition(":")
        deps[module] = needs.split()
    order: list[str] = []

    def visit(module: str) -> None:
        for need in reversed(deps.get(module, [])):
            visit(need)
        if module not in order:
            order.append(module)

    for name in _MODULES:
        found = [m for m in deps if Path(m).name.split(".ko")[0] == name]
        if not found:
            raise ProviderError(f"test guest: kernel {release} has no module {name}")
        visit(found[0])
    return order


def _entries(release: str) -> list[Entry]:
    tree = Path("/lib/modules") / release
    busybox = Path("/bin/busybox")
    top = "bin dev etc etc/labq lib lib/modules lib64 proc root sys tmp usr usr/bin usr/lib"
    entries = [Entry.directory(d) for d in (*top.split(), "usr/sbin", "var", "var/log")]
    entries.append(Entry.chardev("dev/console", 5, 1))
    entries.append(Entry.copy("bin/busybox", busybox))
    applets = _run([str(busybox), "--list"]).split()
    entries += [Entry.symlink(f"bin/{a}", "busybox") for a in applets if a != "busybox"]
    entries.append(Entry.symlink("sbin", "bin"))
    entries += [Entry.copy(inside, Path(host)) for host, inside in _PROGRAMS.items()]
    dirs = {"lib", "lib64", "usr", "usr/lib"}
    for lib in _libraries(list(_PROGRAMS)):
        real = Path(lib).resolve()
        inside = lib.lstrip("/")
        for parent in reversed(Path(inside).parents[:-1]):
            if str(parent) not in dirs:
                dirs.add(str(parent))
                entries.append(Entry.directory(str(parent)))
        entries.append(Entry.copy(inside, real))
    modules = _modules(release)
    for module in modules:
        entries.append(Entry.copy(f"lib/modules/{Path(module).name}", tree / module))
    order = "\n".join(Path(m).name for m in modules) + "\n"
    entries += [
        Entry.file("etc/modules-order", order.encode()),
        Entry.file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n"),
        Entry.file("etc/group", b"root:x:0:\n"),
        Entry.file("etc/shells", b"/bin/sh\n"),
        Entry.file("etc/inittab", _INITTAB.encode()),
        Entry.file("etc/rc.labq", _INIT.encode(), 0o755),
        Entry.file("etc/udhcpc.script", _UDHCPC.encode(), 0o755),
        Entry.symlink("init", "bin/busybox"),  # busybox init: reaps orphans, runs rc.labq
    ]
    return entries


def cache_dir() -> Path:
    """Where built guests are kept (``$XDG_CACHE_HOME/labq/vmguest`` or the like)."""
    return Path(platformdirs.user_cache_dir("labq")) / "vmguest"


def build(cache: Path | None = None) -> Guest:
    """The guest for this machine's packages: built on first use, then from the cache."""
    kernel, release = _kernel()
    key = hashlib.sha256((_BUILD + _versions(release)).encode()).hexdigest()[:16]
    where = (cache or cache_dir()) / key
    guest = Guest(where / "vmlinuz", where / "initrd.img")
    if guest.kernel.is_file() and guest.initrd.is_file():
        return guest
    where.parent.mkdir(parents=True, exist_ok=True)
    tmp = where.parent / f".{key}.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        shutil.copyfile(kernel, tmp / "vmlinuz")
        with (tmp / "initrd.img").open("wb") as out:
            write(out, _entries(release))
        try:
            tmp.rename(where)  # another process may have built it meanwhile: use theirs
        except OSError:
            if not guest.initrd.is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return guest
