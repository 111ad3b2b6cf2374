"""Virtual machines made on demand: what a provider is asked for and what it hands back.

A lab may have a VM provider (``libvirt``, ``command``). The scheduler decides that a
recipe gets a VM of some :class:`VmSize`; the service asks the provider to ``create``
it from a :class:`VmRequest`, waits until it is reachable over SSH, runs the recipe in
it, and ``destroy``-s it when the recipe ends. Every VM a provider makes is named with
:data:`NAME_PREFIX`, so a restarted server can ``list`` them and destroy (or adopt)
the ones no recipe owns any more.

Pure: no libvirt, no processes; the providers live in :mod:`labq.dispatch.vms`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Protocol

from labq.errors import ProviderError

__all__ = [
    "NAME_PREFIX",
    "Hop",
    "ProviderError",
    "Vm",
    "VmProvider",
    "VmRequest",
    "VmSize",
    "vm_name",
]

NAME_PREFIX: Final = "labq-"
# a libvirt domain name, a file name and a host name part all at once
_NAME: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")  # with something after the prefix


def vm_name(*parts: str | int) -> str:
    """The name of a VM labq makes, e.g. ``vm_name("r", 42)`` -> ``labq-r-42``.

    Parts are lowered and anything but letters, digits and ``-`` becomes ``-``.
    """
    tail = "-".join(re.sub(r"[^a-z0-9-]+", "-", str(p).lower()).strip("-") for p in parts)
    return check_name(f"{NAME_PREFIX}{tail}")


_SET: Final = re.compile(r"-s-([0-9]+)$")  # as name_for writes it


def name_for(slot: str, set_id: int) -> str:
    """The name of the VM made on ``slot`` for recipe set ``set_id``."""
    return vm_name(slot, "s", set_id)


def set_of(name: str) -> int | None:
    """The recipe set a VM was made for, from its name (None: not one of ours)."""
    found = _SET.search(name)
    return int(found.group(1)) if found else None


def check_name(name: str) -> str:
    """``name`` if it is a valid name of a VM labq makes; else a one-line error."""
    if name == NAME_PREFIX or not name.startswith(NAME_PREFIX) or not _NAME.fullmatch(name):
        raise ProviderError(
            f"VM name {name!r}: must start with {NAME_PREFIX!r} and hold at most 63 "
            "lower-case letters, digits and '-'"
        )
    return name


@dataclass(frozen=True)
class VmSize:
    """What a VM is given: CPUs, memory and disk."""

    vcpus: int = 1
    memory_mb: int = 512
    disk_gb: int = 4

    def __post_init__(self) -> None:
        for field, value, least in (
            ("vcpus", self.vcpus, 1),
            ("memory_mb", self.memory_mb, 64),
            ("disk_gb", self.disk_gb, 1),
        ):
            if value < least:
                raise ProviderError(f"VM size: {field} is {value}, at least {least} is needed")


@dataclass(frozen=True)
class VmRequest:
    """One VM to make: its name, lab, size, what it boots, and the key that may log in.

    The boot source is ``image`` (a disk image the provider copies on write), or
    ``kernel`` + ``initrd`` (+ ``kernel_args``) from a distro tree; when none is given
    the provider boots its own default image. ``ssh_public_key`` is added to the
    guest's authorized keys besides the provider's per-VM key (None: only that one).
    """

    name: str
    lab: str
    size: VmSize = VmSize()
    image: str | None = None
    kernel: str | None = None
    initrd: str | None = None
    kernel_args: str = ""
    ssh_public_key: str | None = None

    def __post_init__(self) -> None:
        check_name(self.name)
        if self.image is not None and (self.kernel is not None or self.initrd is not None):
            raise ProviderError(f"VM {self.name}: boots an image or a kernel, not both")
        if (self.kernel is None) != (self.initrd is None):
            raise ProviderError(f"VM {self.name}: a kernel needs an initrd, and the other way")


@dataclass(frozen=True)
class Hop:
    """An SSH host a VM is reached through: the hypervisor a guest runs on, whose own
    127.0.0.1 is where the guest's SSH port is forwarded. Checked like any host."""

    host: str
    port: int = 22
    user: str = "root"
    identity_file: str | None = None
    known_hosts: str | None = None  # None: the user's known_hosts


@dataclass(frozen=True)
class Vm:
    """A VM that exists: where to reach it over SSH, and with which key.

    ``identity_file`` is the private key labq made for this VM (0600, in labq's data
    directory); ``known_hosts`` a file holding the VM's host key, so the SSH backend
    checks it like any other host's. Both None: the provider's settings say. ``via``:
    the host its ``address`` is seen from (None: this one).
    """

    name: str
    address: str
    port: int
    user: str
    provider: str
    identity_file: str | None = None
    known_hosts: str | None = None
    via: Hop | None = None


class VmProvider(Protocol):
    """Makes and destroys VMs; one per lab that has dynamic systems.

    Every method may block (seconds for ``create``); call them off the scheduler's
    loop. Every failure is a :class:`~labq.errors.ProviderError` whose message is the
    provider's reason, fit to abort a recipe with.
    """

    @property
    def kind(self) -> str:
        """``libvirt``, ``command``: what the lab's settings call this provider."""
        ...

    def create(self, request: VmRequest) -> Vm:
        """Make the VM and start it booting; it exists (``list`` shows it) on return.

        A name that exists already is an error; a failed create leaves nothing behind.
        """
        ...

    def wait_reachable(self, vm: Vm, deadline: float) -> None:
        """Return once the VM's SSH answers; ``deadline`` is a ``time.monotonic()``.

        Raises :class:`~labq.errors.ProviderError` with the reason (it did not boot,
        its console said why) when the deadline passes first.
        """
        ...

    def destroy(self, name: str) -> None:
        """Stop the VM and remove all of it (disk overlay, keys); a missing VM is fine."""
        ...

    def list(self) -> list[str]:
        """The names of the VMs this provider made (by :data:`NAME_PREFIX`), sorted."""
        ...
