"""``labq demo --vms``: a job needing one system more than the lab's machines gets a libvirt
VM, its recipe runs there over SSH, the VM is destroyed, and the printed commands work.

Needs libvirt and the small guest (docs/operations.md § A libvirt VM provider): skipped
where they are missing, failed under CI=true. Under TCG a boot takes a minute or more.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from labq.errors import ProviderError
from tests.acceptance.conftest import free_port, labq_command
from tests.acceptance.test_demo import (
    FRESH_PATH,
    _printed_commands,
    _printed_token,
    running_demo,
)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"VM tests cannot run: {reason}")
    pytest.skip(reason)


@pytest.fixture
def libvirt_here(tmp_path):
    """The libvirt provider of this host, to list VMs; skipped where it cannot boot one."""
    try:
        from labq.dispatch.vms.guest import build
        from labq.dispatch.vms.libvirt import LibvirtProvider

        provider = LibvirtProvider(state_dir=tmp_path / "probe")
        provider.list()
        build()
    except (ImportError, ProviderError) as exc:
        _unavailable(str(exc))
    return provider


def _virsh_names(uri: str) -> set[str]:
    out = subprocess.run(
        ["virsh", "-c", uri, "list", "--all", "--name"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(out.split())


def test_demo_vms_runs_a_recipe_in_a_vm_made_for_it_and_destroys_it(tmp_path, libvirt_here):
    root = tmp_path / "demo"
    before = _virsh_names(libvirt_here.uri)
    try:
        with running_demo(tmp_path, "--vms", "--dir", str(root), scan=root) as demo:
            token = _printed_token_within(demo, 900)
            text = demo.text()
            commands = _printed_commands(demo)
            pasted = subprocess.run(
                ["bash", "-c", "set -e\n" + "\n".join(commands)],
                env={"PATH": FRESH_PATH, "HOME": str(tmp_path / "home")},
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
            demo.proc.send_signal(signal.SIGINT)
            code = demo.proc.wait(timeout=60)
    finally:
        left = _virsh_names(libvirt_here.uri) - before
        for name in left:  # a VM the demo left: destroyed here, and the test fails below
            subprocess.run(["virsh", "-c", libvirt_here.uri, "destroy", name], check=False)
    assert left == set(), text
    assert token in commands[0]
    assert "labq-vm1-demo-vms-s-4 created" in text, text
    assert "labq-vm1-demo-vms-s-4 destroyed" in text, text
    assert "ran in the VM on vm1.demo.vms: pass" in text, text
    assert "was\n  created, ran task 'where' over SSH and was destroyed" in text, text
    assert pasted.returncode == 0, (commands, pasted.stdout, pasted.stderr)
    assert "on vm1.demo.vms, kernel" in pasted.stdout  # the task's output, from the VM
    assert code == 0, demo.text()
    assert "Traceback" not in demo.text()
    assert not list((root / "data" / "vms").glob("labq-*"))  # the VM's files went with it


def test_demo_vms_without_libvirt_says_what_is_missing_in_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABQ_")}
    (tmp_path / "bin").mkdir()
    env["PATH"] = str(tmp_path / "bin")  # no QEMU on it
    done = subprocess.run(
        [*labq_command(), "demo", "--vms", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1, done.stderr
    assert "is not installed" in done.stderr
    assert "apt-get install" in done.stderr


def _printed_token_within(demo, seconds: float) -> str:
    """The token, printed once the VM job has ended: minutes under TCG."""
    deadline = time.monotonic() + seconds
    while "The admin's token" not in demo.text():
        assert demo.proc.poll() is None, demo.text()
        assert time.monotonic() < deadline, demo.text()
        time.sleep(1)
    return _printed_token(demo)
