"""A lab's backend with VMs made on demand: a recipe placed on a VM slot gets a VM.

The VM is made as the recipe installs (``provision``: the provider's ``create``,
booting the distro tree chosen for the recipe, see :func:`boot_from`; then
``wait_reachable``), its tasks run in it over SSH with the VM's own key and host
key, and it is destroyed when the recipe ends (:meth:`VmBackend.release`, after its
logs are archived) — or, under ``<reservesys>``, kept (:meth:`VmBackend.keep`) until
its reservation ends. Systems that are not slots go to the lab's own backend. A
creation that fails raises the provider's reason, which aborts the recipe (the
retry rules apply); a VM half made is destroyed at once.

VMs are named ``labq-<slot>-s-<set id>``: a restarted server lists each provider's
VMs and destroys those whose set no longer runs (:mod:`labq.service.vms`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from labq.dispatch.backends import Backend
from labq.dispatch.backends.routed import Routed
from labq.dispatch.backends.ssh import SshBackend, SshOptions
from labq.dispatch.plan import SystemInfo, Workspace
from labq.domain.vms import Vm, VmProvider, VmRequest, VmSize, name_for, set_of
from labq.errors import ProviderError


def is_slot(system: SystemInfo) -> bool:
    """Whether the system is a VM slot (its attributes carry the VM's size); a guest of a
    slot's recipe is not, though it carries its host's attributes (guests.py makes it)."""
    return "vm_size" in system.attributes and system.guest_of is None


def _local(location: str) -> str:
    """A ``file://`` URL as the path it names (the libvirt provider reads paths)."""
    return location.removeprefix("file://") if location.startswith("file:///") else location


def boot_from(provision: Mapping[str, str]) -> dict[str, str]:
    """What a VM boots, from the tree the supervisor chose for the recipe (the reimage
    hook's variables, :mod:`labq.dispatch.provisioning`): the tree's kernel and initrd
    (with the recipe's ``kernel_options``), or an image's location; nothing (the
    provider's default) when the recipe named no distro or its tree has neither."""
    kernel = provision.get("LABQ_DISTRO_KERNEL", "")
    initrd = provision.get("LABQ_DISTRO_INITRD", "")
    if kernel and initrd:
        args = provision.get("LABQ_KERNEL_OPTIONS", "")
        return {"kernel": _local(kernel), "initrd": _local(initrd), "kernel_args": args}
    where = provision.get("LABQ_DISTRO_TREE", "")
    if provision.get("LABQ_DISTRO_KIND") == "image" and where:
        return {"image": _local(where)}
    return {}


class VmBackend(Routed):
    """The lab's backend, but for VM slots: those run in a VM made for the recipe."""

    def __init__(
        self,
        inner: Backend,
        provider: VmProvider,
        *,
        set_id: int,
        create_timeout: float,
        workspace: str = "labq-workspace",
    ) -> None:
        self.workspace = workspace
        self.inner = inner
        self.provider = provider
        self.set_id = set_id
        self.create_timeout = create_timeout
        self._vms: dict[str, tuple[Vm, SshBackend, SystemInfo]] = {}

    def provision(
        self, system: SystemInfo, workspace: Workspace, *, cancel_event: threading.Event
    ) -> None:
        if not is_slot(system):
            self.inner.provision(system, workspace, cancel_event=cancel_event)
            return
        attrs = system.attributes
        size = VmSize(vcpus=int(attrs.get("cpus", 1)), memory_mb=int(attrs.get("memory_mb", 512)))
        name = name_for(system.fqdn, self.set_id)
        self._clear(system.fqdn)
        vm = self.provider.create(
            VmRequest(name, system.lab, size, **boot_from(workspace.provision))
        )
        try:
            self.provider.wait_reachable(vm, time.monotonic() + self.create_timeout)
            options = SshOptions(
                user=vm.user,
                port=vm.port,
                identity_file=vm.identity_file,
                known_hosts=vm.known_hosts,
                boot_timeout=self.create_timeout,
                workspace=self.workspace,
            )
            ssh = SshBackend(options)
            info = replace(system, address=vm.address)
            self._vms[system.fqdn] = (vm, ssh, info)
            ssh.provision(info, workspace, cancel_event=cancel_event)
        except BaseException:
            self.release(system)
            with contextlib.suppress(ProviderError):
                self.provider.destroy(name)
            raise

    def _clear(self, slot: str) -> None:
        """Destroy a VM another set left on ``slot`` before making ours: the slot is ours,
        so one left there is a ``<reservesys>`` VM whose reservation ended (the leader
        destroys those off its scheduling thread, and may not have yet) or an orphan. A
        slot never holds two VMs at once, so its lab's quota is never exceeded."""
        for left in self.provider.list():
            owner = set_of(left)
            if owner is not None and owner != self.set_id and left == name_for(slot, owner):
                self.provider.destroy(left)

    def route(self, system: SystemInfo) -> tuple[Backend, SystemInfo]:
        """A slot's VM (once made), or the lab's own backend."""
        if not is_slot(system):
            return self.inner, system
        made = self._vms.get(system.fqdn)
        if made is None:
            raise ProviderError(f"no VM was made on {system.fqdn}")
        return made[1], made[2]

    def collect_logs(self, system: SystemInfo, dest: Path) -> None:
        if is_slot(system) and system.fqdn not in self._vms:
            return  # no VM was made: nothing to collect
        super().collect_logs(system, dest)

    def cleanup(self, system: SystemInfo, *, log_dir: Path) -> None:
        if not is_slot(system):
            self.inner.cleanup(system, log_dir=log_dir)
        # a VM is not cleaned: it is destroyed when its recipe ends (release)

    def keep(self, system: SystemInfo) -> Vm | None:
        """The recipe on ``system`` ended under ``<reservesys>``: its VM stays, to be
        destroyed when the reservation ends (:mod:`labq.service.vms`); the VM, if made."""
        made = self._vms.pop(system.fqdn, None)
        return None if made is None else made[0]

    def release(self, system: SystemInfo) -> None:
        """The recipe on ``system`` ended: destroy its VM, if one was made."""
        made = self._vms.pop(system.fqdn, None)
        if made is not None:
            self.provider.destroy(made[0].name)
