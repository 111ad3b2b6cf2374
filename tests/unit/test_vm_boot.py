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
from labq.domain.vms import Vm, VmRequest
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
