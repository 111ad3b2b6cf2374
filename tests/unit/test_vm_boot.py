"""A VM made for a recipe boots the distro tree chosen for it, as the reimage hook is told."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from labq.dispatch.backends.local import LocalBackend
from labq.dispatch.plan import SystemInfo, Workspace
from labq.dispatch.provisioning import provision_environment
from labq.dispatch.vms.backend import VmBackend, boot_from
from labq.domain.distro import DistroTree, choose_tree, requirement_of
from labq.domain.vms import Vm, VmRequest, name_for
from labq.errors import ProviderError

SLOT = SystemInfo("vm1.lab1.vms", "lab1", attributes={"vm_size": "m", "cpus": 2, "memory_mb": 1024})
TREES = [
    DistroTree(
        lab="lab1",
        name="Fedora-40",
        arch="x86_64",
        family="Fedora40",
        version="40",
        url="file:///srv/trees/f40/",
        kernel="file:///srv/trees/f40/images/pxeboot/vmlinuz",
        initrd="file:///srv/trees/f40/images/pxeboot/initrd.img",
    ),
    DistroTree(lab="lab1", name="Fedora-40", arch="aarch64", family="Fedora40", version="40"),
    DistroTree(
        lab="lab1",
        name="rhel-9.3",
        arch="x86_64",
        family="RedHatEnterpriseLinux9",
        kind="image",
        url="https://images.example/rhel-9.3.qcow2",
    ),
]


class Recording:
    """A provider that writes down what it was asked to make, and makes nothing."""

    kind = "recording"

    def __init__(self) -> None:
        self.requests: list[VmRequest] = []

    def create(self, request: VmRequest) -> Vm:
        self.requests.append(request)
        raise ProviderError("no room in the cloud")

    def wait_reachable(self, vm: Vm, deadline: float) -> None:
        raise AssertionError("never reached")

    def destroy(self, name: str) -> None:
        pass

    def list(self) -> list[str]:
        return []


def made_for(metadata: dict[str, Any], tmp_path: Path) -> VmRequest:
    """The request the VM backend makes for a recipe with ``metadata`` on SLOT, the tree
    chosen as the supervisor chooses it."""
    tree = choose_tree(TREES, requirement_of(metadata), SLOT.arch)
    provider = Recording()
    backend = VmBackend(LocalBackend(tmp_path), provider, set_id=7, create_timeout=60.0)
    workspace = Workspace(tmp_path, provision=provision_environment(metadata, tree))
    with pytest.raises(ProviderError, match="no room"):
        backend.provision(SLOT, workspace, cancel_event=threading.Event())
    [request] = provider.requests
    return request


def test_the_vm_boots_the_chosen_trees_kernel_and_initrd(tmp_path: Path) -> None:
    metadata = {"distro_requires": {"family": "Fedora40"}, "kernel_options": "console=ttyS0"}
    request = made_for(metadata, tmp_path)
    assert request.kernel == "/srv/trees/f40/images/pxeboot/vmlinuz"
    assert request.initrd == "/srv/trees/f40/images/pxeboot/initrd.img"
    assert request.kernel_args == "console=ttyS0"
    assert request.image is None
    assert (request.size.vcpus, request.size.memory_mb) == (2, 1024)


def test_the_vm_boots_the_chosen_image(tmp_path: Path) -> None:
    request = made_for({"distro_requires": {"family": "RedHatEnterpriseLinux9"}}, tmp_path)
    assert request.image == "https://images.example/rhel-9.3.qcow2"
    assert request.kernel is None


def test_a_custom_distro_boots_its_own_kernel(tmp_path: Path) -> None:
    custom = {"tree": "http://trees.example/f41/", "kernel": "vmlinuz", "initrd": "initrd.img"}
    request = made_for({"distro": custom}, tmp_path)
    assert request.kernel == "http://trees.example/f41/vmlinuz"
    assert request.initrd == "http://trees.example/f41/initrd.img"


@pytest.mark.parametrize(
    "metadata",
    [{}, {"distro_requires": {"family": "CentOSStream9"}}, {"whiteboard": "no distro"}],
)
def test_without_a_chosen_tree_the_provider_boots_its_default(
    metadata: dict[str, Any], tmp_path: Path
) -> None:
    request = made_for(metadata, tmp_path)
    assert (request.image, request.kernel, request.initrd) == (None, None, None)


def test_a_tree_without_boot_files_leaves_the_default() -> None:
    tree = DistroTree(lab="l", name="bare", arch="x86_64", family="Fedora40", url="/srv/bare")
    assert boot_from(provision_environment({}, tree)) == {}


class Holding(Recording):
    """A provider holding VMs by name; it refuses to make one while the slot's quota
    (one VM) is taken, as a full cloud would."""

    def __init__(self, *names: str) -> None:
        super().__init__()
        self.names = set(names)
        self.destroyed: list[str] = []

    def create(self, request: VmRequest) -> Vm:
        if any(name.startswith("labq-vm1-lab1-vms-") for name in self.names):
            raise AssertionError(f"two VMs on one slot: {sorted(self.names)} + {request.name}")
        return super().create(request)

    def destroy(self, name: str) -> None:
        self.destroyed.append(name)
        self.names.discard(name)

    def list(self) -> list[str]:
        return sorted(self.names)


def test_a_vm_kept_on_the_slot_is_destroyed_before_the_next_set_makes_its_own(
    tmp_path: Path,
) -> None:
    # set 3's <reservesys> kept its VM; the reservation ended and the leader has not
    # destroyed it yet when set 7 is given the slot. Other slots' VMs and other sets'
    # VMs whose names merely look alike are left.
    kept, other = name_for(SLOT.fqdn, 3), name_for("vm2.lab1.vms", 4)
    provider = Holding(kept, other, "labq-g-guest-s-3")
    backend = VmBackend(LocalBackend(tmp_path), provider, set_id=7, create_timeout=60.0)
    with pytest.raises(ProviderError, match="no room"):
        backend.provision(SLOT, Workspace(tmp_path), cancel_event=threading.Event())
    assert provider.destroyed == [kept]
    assert [r.name for r in provider.requests] == [name_for(SLOT.fqdn, 7)]
    assert provider.list() == sorted([other, "labq-g-guest-s-3"])
