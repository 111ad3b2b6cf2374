"""Guests are VMs: a recipe's ``<guestrecipe>`` runs in a VM made for it, over SSH.

:class:`VmGuests` wraps a lab's backend. The host recipe's own system goes to that
backend as before; a guest (a system with ``guest_of``) becomes a VM of the lab's
provider when the set runner provisions it, its tasks run in it through the SSH
backend with the VM's own key, its logs are collected from it, and the runner's
end-of-guest clean-up destroys it — so it lives as long as its host recipe runs. A
guest's ``guest_args`` is Beaker's ``guestargs`` (``virt-install`` options);
``--vcpus N`` and ``--ram MB`` / ``--memory MB`` size the VM, the rest is ignored.

The VMs live in the supervisor's process; if it dies, the server's start-up finds
them by the provider's ``list`` and destroys them like any orphan.

In a lab whose systems are libvirt hypervisors (``labs.NAME.guests``), a guest is
made on its host recipe's own system instead: ``on_host`` gives the provider of a
host (:class:`labq.dispatch.vms.hypervisor.Hypervisor`), and the guest's SSH goes
through that host.
"""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Callable
from pathlib import Path

from labq.dispatch.backends import Backend
from labq.dispatch.backends.routed import Routed
from labq.dispatch.backends.ssh import SshBackend, SshOptions
from labq.dispatch.plan import SystemInfo, Workspace
from labq.domain.vms import Vm, VmProvider, VmRequest, VmSize, set_of, vm_name
from labq.errors import ProviderError


def guest_size(guest_args: str | None, default: VmSize) -> VmSize:
    """The VM size ``virt-install`` options ask for (``--vcpus``, ``--ram``/``--memory``)."""
    try:
        words = shlex.split(guest_args or "")
    except ValueError:
        raise ProviderError(f"guestargs {guest_args!r}: unbalanced quotes") from None
    values: dict[str, int] = {}
    for i, word in enumerate(words):
        key, _, value = word.partition("=")
        if key in ("--vcpus", "--ram", "--memory"):
            value = value or (words[i + 1] if i + 1 < len(words) else "")
            number = value.split(",")[0]
            if not number.isdigit():
                raise ProviderError(f"guestargs {guest_args!r}: {key} needs a number")
            values["vcpus" if key == "--vcpus" else "memory_mb"] = int(number)
    return VmSize(
        values.get("vcpus", default.vcpus), values.get("memory_mb", default.memory_mb),
        default.disk_gb,
    )  # fmt: skip


def guest_vm_name(guest: str, set_id: int) -> str:
    """``labq-g-<guest>-s-<set>``: at most 63 characters; :func:`labq.domain.vms.set_of`
    reads the set back."""
    return vm_name("g", guest[:40], "s", set_id)


class VmGuests(Routed):
    """A backend whose guests are VMs of ``provider``; everything else goes to ``inner``.

    A guest's VM is named for the guest and its recipe set (:func:`guest_vm_name`),
    so the leader's sweep leaves it while the set runs and destroys it after.
    """

    def __init__(
        self,
        inner: Backend,
        provider: VmProvider | None,
        *,
        set_id: int,
        on_host: Callable[[SystemInfo], VmProvider] | None = None,
        size: VmSize | None = None,
        boot_timeout: float = 900.0,
        grace: float = 2.0,
        workspace: str = "labq-workspace",
    ) -> None:
        if (provider is None) == (on_host is None):
            raise ProviderError("guests are made by the lab's provider or on their host")
        self.inner = inner
        self.provider = provider
        self.on_host = on_host
        self._hosts: dict[str, SystemInfo] = {}  # provisioned here: the guests' hosts
        self._providers: dict[str, VmProvider] = {}  # a host's, made once
        self.set_id = set_id
        self.size = size or VmSize()
        self.boot_timeout = boot_timeout
        self.grace = grace
        self.workspace = workspace  # in the VM, as ssh's (SshOptions.workspace)
        self._vms: dict[str, tuple[Vm, SshBackend, VmProvider]] = {}
        self._lock = threading.Lock()

    def _name(self, system: SystemInfo) -> str:
        return guest_vm_name(system.fqdn, self.set_id)

    def route(self, system: SystemInfo) -> tuple[Backend, SystemInfo]:
        """A guest's VM (once made), or the inner backend."""
        if system.guest_of is None:
            return self.inner, system
        with self._lock:
            made = self._vms.get(system.fqdn)
        if made is None:
            raise ProviderError(f"guest {system.fqdn} has no VM (it was not provisioned)")
        vm, ssh, _ = made
        return ssh, SystemInfo(system.fqdn, system.lab, system.arch, address=vm.address)

    def _provider(self, guest: SystemInfo) -> VmProvider:
        """The lab's provider, or the one of the guest's host (made on first use)."""
        if self.on_host is None:
            assert self.provider is not None  # one of the two: checked when made
            return self.provider
        host_fqdn = guest.guest_of or ""
        with self._lock:
            host = self._hosts.get(host_fqdn, SystemInfo(host_fqdn, guest.lab, guest.arch))
            made = self._providers.get(host_fqdn)
        if made is None:
            made = self.on_host(host)
            with self._lock:
                self._providers.setdefault(host_fqdn, made)
            self._sweep(made)
        return made

    def _sweep(self, provider: VmProvider) -> None:
        """Destroy what a host holds of other sets' guests: a host serves one recipe at a
        time, so any such VM is left from a set whose supervisor died (no leader's sweep
        reaches every host)."""
        for name in provider.list():
            if set_of(name) != self.set_id:
                provider.destroy(name)

    def provision(
        self, system: SystemInfo, workspace: Workspace, *, cancel_event: threading.Event
    ) -> None:
        """A guest: make its VM and wait for its SSH, then lay out its workspace."""
        if system.guest_of is None:
            with self._lock:
                self._hosts[system.fqdn] = system
            self.inner.provision(system, workspace, cancel_event=cancel_event)
            return
        size = guest_size(system.guest_args, self.size)
        provider = self._provider(system)
        vm = provider.create(VmRequest(self._name(system), system.lab, size))
        with self._lock:
            self._vms[system.fqdn] = (
                vm,
                SshBackend(SshOptions.for_vm(vm, self.workspace), grace=self.grace),
                provider,
            )
        provider.wait_reachable(vm, time.monotonic() + self.boot_timeout)
        backend, where = self.route(system)
        backend.provision(where, workspace, cancel_event=cancel_event)

    def cleanup(self, system: SystemInfo, *, log_dir: Path) -> None:
        """A guest: destroy its VM (whatever became of it); else the inner clean-up."""
        if system.guest_of is None:
            self.inner.cleanup(system, log_dir=log_dir)
            return
        with self._lock:
            made = self._vms.pop(system.fqdn, None)
        provider = made[2] if made is not None else self._provider(system)
        provider.destroy(self._name(system))
