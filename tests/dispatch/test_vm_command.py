"""The ``command`` VM provider with hooks that make "a VM" out of a real sshd
(tests/vmhooks.py): created, reached over SSH with its own key, listed, destroyed."""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from pathlib import Path

import asyncssh
import pytest

from labq.dispatch.vms.command import CommandProvider
from labq.domain.vms import ProviderError, VmRequest, VmSize, vm_name
from labq.vmconfig import CommandHooks

HOOKS = Path(__file__).parents[1] / "vmhooks.py"


def hooks(state: Path, timeout: float = 60.0) -> CommandHooks:
    base = [sys.executable, str(HOOKS)]
    return CommandHooks(
        create=[*base, "create", str(state), "{name}", "{public_key}"],
        destroy=[*base, "destroy", str(state), "{name}"],
        list=[*base, "list", str(state)],
        timeout=timeout,
    )


@pytest.fixture
def provider(tmp_path):
    if not Path("/usr/sbin/sshd").exists() or shutil.which("ssh-keygen") is None:
        pytest.skip("sshd is not installed (apt-get install openssh-server)")
    made = CommandProvider(hooks(tmp_path / "cloud"), state_dir=tmp_path / "labq-vms")
    yield made
    for name in made.list():  # no sshd outlives the test
        made.destroy(name)


async def _ssh(vm, command: str) -> str:
    async with asyncssh.connect(
        vm.address,
        port=vm.port,
        username=vm.user,
        known_hosts=vm.known_hosts,
        client_keys=[vm.identity_file],
    ) as conn:
        done = await conn.run(command, check=True)
        return str(done.stdout)


def test_a_vm_is_made_reached_over_ssh_with_its_own_key_and_destroyed(provider, tmp_path):
    name = vm_name("r", 7)
    vm = provider.create(VmRequest(name, "east", VmSize(vcpus=2, memory_mb=1024)))
    provider.wait_reachable(vm, time.monotonic() + 30)
    assert provider.list() == [name]
    assert asyncio.run(_ssh(vm, "echo hello from the vm")) == "hello from the vm\n"
    key = Path(vm.identity_file or "")
    assert key.stat().st_mode & 0o777 == 0o600
    # the hook got the public key only
    handed = (tmp_path / "cloud" / name / "authorized_keys").read_text()
    assert handed.startswith("ssh-ed25519 ")
    assert "PRIVATE" not in handed
    provider.destroy(name)
    assert provider.list() == []
    assert not key.exists()
    with pytest.raises(ProviderError, match="did not answer"):
        provider.wait_reachable(vm, time.monotonic() + 0.5)
    provider.destroy(name)  # again: a missing VM is fine


def test_a_failed_create_gives_the_clouds_reason_and_leaves_nothing(provider, tmp_path):
    (tmp_path / "cloud").mkdir()
    (tmp_path / "cloud" / "fail").write_text("no more floating IPs")
    with pytest.raises(ProviderError, match=r"create hook failed: .*no more floating IPs"):
        provider.create(VmRequest(vm_name("r", 8), "east"))
    assert provider.list() == []
    assert list((tmp_path / "labq-vms").iterdir()) == []


def test_a_hook_that_hangs_is_cut_off(tmp_path):
    (tmp_path / "cloud").mkdir()
    (tmp_path / "cloud" / "slow").write_text("30")
    provider = CommandProvider(hooks(tmp_path / "cloud", timeout=1), state_dir=tmp_path / "s")
    with pytest.raises(ProviderError, match="create hook timed out after 1 s"):
        provider.create(VmRequest(vm_name("r", 9), "east"))
    assert provider.list() == []


def test_the_list_keeps_labqs_vms_only(tmp_path):
    (tmp_path / "cloud" / "someone-elses").mkdir(parents=True)
    provider = CommandProvider(hooks(tmp_path / "cloud"), state_dir=tmp_path / "s")
    assert provider.list() == []


def test_create_is_told_the_boot_source(tmp_path):
    said = "import os, sys; sys.exit(' '.join(sys.argv[1:] + [os.environ['LABQ_VM_INITRD']]))"
    hooks_ = CommandHooks(
        create=[sys.executable, "-c", said, "{kernel}", "[{image}]", "{kernel_args}"],
        destroy=["true"],
        list=[sys.executable, "-c", "print('[]')"],
    )
    provider = CommandProvider(hooks_, state_dir=tmp_path / "s")
    request = VmRequest(
        vm_name("r", 10), "east", kernel="/t/vmlinuz", initrd="/t/initrd.img", kernel_args="quiet"
    )
    with pytest.raises(ProviderError, match=r"failed: /t/vmlinuz \[\] quiet /t/initrd.img$"):
        provider.create(request)
