"""The libvirt VM provider booting the small Debian guest for real (KVM, else TCG).

Needs libvirt (a running libvirtd and virtlogd), QEMU and the guest's packages; .ci/run
installs and starts them. Missing, the tests skip on a laptop and fail under CI=true.
Every VM a test makes is destroyed when it ends, passed or failed.
"""

import getpass
import http.server
import os
import shutil
import subprocess
import threading
import time
import uuid
from collections import defaultdict

import pytest

from labq.dispatch.backends.ssh import SshBackend, SshOptions
from labq.dispatch.plan import RecipePlan, SetPlan, SystemInfo
from labq.dispatch.runner import run_set
from labq.domain.states import RecipeState, Result
from labq.domain.vms import VmRequest, VmSize, set_of
from labq.errors import ProviderError

from .conftest import system, task
from .test_ssh import sshd

__all__ = ["sshd"]  # the fixture, for the guests made on a hypervisor over SSH

BOOT = 600  # seconds: TCG on a loaded machine takes a minute, KVM a few seconds


def _unavailable(reason):
    if os.environ.get("CI") == "true":
        pytest.fail(f"VM tests cannot run: {reason}")
    pytest.skip(reason)


@pytest.fixture
def provider(tmp_path):
    """A libvirt provider of this test's own; its VMs are destroyed at the end."""
    try:
        from labq.dispatch.vms.guest import build
        from labq.dispatch.vms.libvirt import LibvirtProvider

        made = LibvirtProvider(state_dir=tmp_path / "vms")
        made.list()
        build()
    except ProviderError as exc:
        _unavailable(str(exc))
    if shutil.which("qemu-img") is None:
        _unavailable("qemu-img is not installed (apt-get install qemu-utils)")
    try:
        yield made
    finally:
        for name in made.list():
            made.destroy(name)


def guest_kernel_args():
    from labq.dispatch.vms.guest import KERNEL_ARGS

    return KERNEL_ARGS


def _name():
    return f"labq-test-{uuid.uuid4().hex[:10]}"


def _virsh_names(provider):
    out = subprocess.run(
        ["virsh", "-c", provider.uri, "list", "--all", "--name"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(out.split())


@pytest.fixture
def tree_over_http():
    """The small guest's kernel and initrd served over HTTP, as an imported tree's are."""
    from labq.dispatch.vms.guest import build

    guest = build()
    files = {"/vmlinuz": guest.kernel, "/initrd.img": guest.initrd}

    class Tree(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = files[self.path].read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Tree)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_vm_boots_runs_a_recipe_over_ssh_and_is_destroyed(
    provider, tmp_path, reporter, tree_over_http
):
    name = _name()
    # the tree's kernel and initrd over HTTP (a tree imported from a URL): downloaded first
    request = VmRequest(
        name,
        "lab1",
        VmSize(vcpus=1, memory_mb=256),
        kernel=f"{tree_over_http}/vmlinuz",
        initrd=f"{tree_over_http}/initrd.img",
        kernel_args=guest_kernel_args(),
    )
    vm = provider.create(request)
    assert provider.list() == [name]  # the boot cache beside it is no VM
    cached = sorted(p.name for p in (tmp_path / "vms" / "boot-files").rglob("*") if p.is_file())
    assert cached == ["initrd.img", "validators.json", "validators.json", "vmlinuz"]
    assert oct((tmp_path / "vms" / name / "id_ed25519").stat().st_mode & 0o777) == "0o600"
    provider.wait_reachable(vm, time.monotonic() + BOOT)

    backend = SshBackend(SshOptions.for_vm(vm), grace=0.5)
    system = SystemInfo(fqdn=vm.name, lab="lab1", address=vm.address)
    plan = SetPlan(
        id=1,
        job_id=1,
        recipes=(RecipePlan(id=1, system=system, tasks=(task(1, "uname -a; echo ok"),)),),
    )
    data = tmp_path / "data"
    outcome = run_set(
        plan, defaultdict(lambda: backend), data_dir=data, reporter=reporter, heartbeat_every=1
    )
    recipe = outcome.recipe(1)
    assert recipe.state is RecipeState.COMPLETED, recipe.reason
    assert [t.result for t in recipe.tasks] == [Result.PASS]
    log = (data / "logs" / "set-1" / name / "task-1-t1.log").read_text()
    assert f"Linux {name} " in log
    assert "GNU/Linux\nok\n" in log

    provider.destroy(name)
    assert name not in provider.list()
    assert name not in _virsh_names(provider)
    assert not (tmp_path / "vms" / name).exists()
    provider.destroy(name)  # again: nothing left, no error


def test_a_restarted_server_finds_and_destroys_an_orphan(provider, tmp_path):
    from labq.dispatch.vms.libvirt import LibvirtProvider

    name = _name()
    provider.create(VmRequest(name, "lab1", VmSize(memory_mb=256)))
    restarted = LibvirtProvider(state_dir=tmp_path / "vms")  # a new server, same data dir
    assert restarted.list() == [name]
    other = LibvirtProvider(state_dir=tmp_path / "elsewhere")  # another installation
    assert other.list() == []
    other.destroy(name)  # not its VM: left alone
    assert name in _virsh_names(provider)

    restarted.destroy(name)
    assert restarted.list() == []
    assert name not in _virsh_names(provider)


def test_a_failed_create_leaves_nothing_and_says_why(provider, tmp_path):
    name = _name()
    missing = f"VM {name}: image: .*no-such.qcow2 does not exist"
    with pytest.raises(ProviderError, match=missing) as caught:
        provider.create(VmRequest(name, "lab1", image=str(tmp_path / "no-such.qcow2")))
    assert "\n" not in str(caught.value)
    assert provider.list() == []
    assert name not in _virsh_names(provider)


def test_a_vm_that_does_not_boot_is_reported_with_its_console(provider):
    from labq.dispatch.vms.guest import build

    name = _name()
    guest = build()
    broken = "console=ttyS0 panic=-1 rdinit=/no/such/init"
    request = VmRequest(
        name, "lab1", kernel=str(guest.kernel), initrd=str(guest.initrd), kernel_args=broken
    )
    vm = provider.create(request)
    with pytest.raises(ProviderError, match=f"VM {name} stopped while booting; console: .*"):
        provider.wait_reachable(vm, time.monotonic() + BOOT)


def test_a_guest_recipe_runs_in_a_vm_of_its_own(provider, data_dir, local, reporter):
    from labq.dispatch.plan import GuestPlan
    from labq.dispatch.vms.guests import VmGuests

    set_id = 7_000_000 + uuid.uuid4().int % 1_000_000  # no other run's VM has its name
    backend = VmGuests(local, provider, set_id=set_id, size=VmSize(memory_mb=256), grace=0.5)
    host = system("host1.test")
    guest = GuestPlan(
        system=SystemInfo("vm1", "lab1", guest_of="host1.test", guest_args="--ram=300 --vcpus=1"),
        tasks=(
            task(2, 'uname -n > "$LABQ_LOG_DIR/me"; echo "$LABQ_HOST_FQDN" >> "$LABQ_LOG_DIR/me"'),
        ),
    )
    plan = SetPlan(
        id=set_id,
        job_id=3,
        recipes=(RecipePlan(id=1, system=host, tasks=(task(1, "uname -n"),), guests=(guest,)),),
    )
    outcome = run_set(
        plan, defaultdict(lambda: backend), data_dir=data_dir, reporter=reporter, heartbeat_every=1
    )

    (recipe,) = outcome.recipes
    assert recipe.state is RecipeState.COMPLETED, recipe.reason
    assert [t.result for t in recipe.tasks] == [Result.PASS, Result.PASS]
    logs = data_dir / "logs" / f"set-{set_id}" / "host1.test"
    # the guest's own results: it ran in the VM (its host name), told of its host
    name = f"labq-g-vm1-s-{set_id}"
    assert set_of(name) == set_id  # the leader's sweep leaves it while its set runs
    assert (logs / "guests/vm1/collected/me").read_text() == f"{name}\nhost1.test\n"
    assert provider.list() == []  # destroyed with its host recipe's end
    assert name not in _virsh_names(provider)


@pytest.mark.parametrize(
    ("args", "vcpus", "memory_mb"),
    [
        (None, 1, 512),
        ("--ram=1024 --vcpus=2", 2, 1024),
        ("--memory 2048 --vcpus 4,maxvcpus=8 --os-variant fedora38", 4, 2048),
    ],
)
def test_guestargs_size_the_vm(args, vcpus, memory_mb):
    from labq.dispatch.vms.guests import guest_size

    size = guest_size(args, VmSize())
    assert (size.vcpus, size.memory_mb) == (vcpus, memory_mb)


def test_bad_guestargs_are_one_line():
    from labq.dispatch.vms.guests import guest_size

    with pytest.raises(ProviderError, match="--ram needs a number"):
        guest_size("--ram=lots", VmSize())


def test_a_guest_is_made_on_its_hosts_hypervisor_over_ssh(provider, sshd, tmp_path, reporter):
    """A ``<guestrecipe>`` whose host recipe runs on a libvirt hypervisor reached over SSH
    (an sshd of the test's own on 127.0.0.1, as another machine would be; its libvirt is
    this machine's): the guest's files are placed in the host's directory, its VM is made
    there through libvirt's SSH transport, its tasks run in it through the host, and a VM
    left on that host by an earlier set is destroyed first. Nothing of either is left."""
    from labq.dispatch.plan import GuestPlan
    from labq.dispatch.vms.guests import VmGuests, guest_vm_name
    from labq.dispatch.vms.hypervisor import Hypervisor
    from labq.dispatch.vms.libvirt import LibvirtProvider
    from labq.domain.vms import Hop

    user = getpass.getuser()
    hop = Hop("127.0.0.1", sshd["port"], user, sshd["key"], sshd["known_hosts"])
    there = tmp_path / "on-the-host" / "guests"  # the host's guests' dir (another machine's)
    hypervisor = Hypervisor(hop, dir=str(there), session=True)
    assert hypervisor.uri.startswith(f"qemu+libssh://{user}@127.0.0.1:{sshd['port']}/session?")

    def on_host(host):
        assert host.fqdn == "hv1.test"
        return LibvirtProvider(state_dir=tmp_path / "vms-hv1", hypervisor=hypervisor)

    set_id = 7_000_000 + uuid.uuid4().int % 1_000_000
    left = on_host(system("hv1.test")).create(
        VmRequest(guest_vm_name("old", set_id - 1), "lab1", VmSize(memory_mb=128))
    )  # an earlier set's guest whose supervisor died: only started, never waited for
    inner = SshBackend(
        SshOptions(user, sshd["port"], sshd["key"], sshd["known_hosts"], str(tmp_path / "ws")),
        grace=0.5,
    )
    backend = VmGuests(inner, None, set_id=set_id, on_host=on_host, size=VmSize(memory_mb=256))
    host = SystemInfo("hv1.test", "lab1", address="127.0.0.1")
    guest = GuestPlan(
        system=SystemInfo("g1", "lab1", guest_of="hv1.test", guest_args="--ram=300"),
        tasks=(task(2, 'uname -n > "$LABQ_LOG_DIR/me"'),),
    )
    placed = f'ls {there}/* > "$LABQ_LOG_DIR/placed"'  # on the host, while the guest runs
    plan = SetPlan(
        id=set_id,
        job_id=3,
        recipes=(RecipePlan(id=1, system=host, tasks=(task(1, placed),), guests=(guest,)),),
    )
    try:
        outcome = run_set(
            plan,
            defaultdict(lambda: backend),
            data_dir=tmp_path / "data",
            reporter=reporter,
            heartbeat_every=1,
        )
    finally:
        LibvirtProvider(state_dir=tmp_path / "vms-hv1", hypervisor=hypervisor).destroy(left.name)

    (recipe,) = outcome.recipes
    assert recipe.state is RecipeState.COMPLETED, recipe.reason
    assert [t.result for t in recipe.tasks] == [Result.PASS, Result.PASS]
    name = guest_vm_name("g1", set_id)
    logs = tmp_path / "data" / "logs" / f"set-{set_id}" / "hv1.test"
    assert (logs / "guests/g1/collected/me").read_text() == f"{name}\n"  # it ran in the VM
    assert (logs / "collected/placed").read_text().split() == [
        "console.log", "disk.qcow2", "initrd", "kernel"
    ]  # fmt: skip
    assert list(there.iterdir()) == []  # both VMs' files gone from the host
    assert not ({name, left.name} & _virsh_names(on_host(host)))
