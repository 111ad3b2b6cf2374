"""VMs made on demand by a real server (issue 24): the ``command`` provider with hooks
that make "a VM" out of a real sshd (tests/vmhooks.py), so the recipe truly runs over SSH.

A two-host job in a lab of one machine gets a VM for its second recipe, runs there
and ends; the VM is destroyed. A creation that fails aborts the recipe with the
provider's reason. A server killed while a VM is being made: the new leader adopts
the VM of the set that still runs and destroys any that no running set owns.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from labq.dispatch.vms.command import CommandProvider
from labq.domain.vms import ProviderError, VmRequest, name_for
from labq.vmconfig import CommandHooks
from tests.acceptance.test_restarts import (
    SETTINGS,
    LabServer,
    assert_never_double_booked,
    job_state,
    submit,
    wait_until,
)

HOOKS = Path(__file__).parents[1] / "vmhooks.py"
SLOT = "vm1.lab1.vms"

PAIR_JOB = """
whiteboard: pair
recipe_sets:
  - recipes:
      - tasks: [{name: where, run: 'echo "on $LABQ_FQDN"; echo vm-log > "$LABQ_LOG_DIR/vm.txt"'}]
      - tasks: [{name: where, run: 'echo "on $LABQ_FQDN"; echo vm-log > "$LABQ_LOG_DIR/vm.txt"'}]
"""


def hooks(state: Path) -> CommandHooks:
    base = [sys.executable, str(HOOKS)]
    return CommandHooks(
        create=[*base, "create", str(state), "{name}", "{public_key}"],
        destroy=[*base, "destroy", str(state), "{name}"],
        list=[*base, "list", str(state)],
        timeout=120,
    )


def settings(root: Path, kind: str = "command") -> str:
    given = hooks(root / "cloud")
    vms: dict[str, object] = {
        "kind": kind,
        "max_vms": 1,
        "max_vcpus": 2,
        "max_memory": 2048,
        "sizes": [{"name": "small", "cpus": 1, "memory": 1024}],
        "user": getpass.getuser(),
        "workspace": str(root / "vm-workspace"),
        "create_timeout": 60,
        "command": given.model_dump(),
    }
    if kind == "libvirt":  # the small Debian guest, logged into as root, booted under TCG maybe
        vms.update(user="root", workspace="labq-workspace", create_timeout=600)
        del vms["command"]
    return SETTINGS + "labs:\n  lab1:\n    vms: " + json.dumps(vms) + "\n"


@pytest.fixture
def lab(database_url, tmp_path):
    if not Path("/usr/sbin/sshd").exists() or shutil.which("ssh-keygen") is None:
        pytest.skip("sshd is not installed (apt-get install openssh-server)")
    (tmp_path / "cloud").mkdir()
    server = LabServer(database_url, tmp_path, settings=settings(tmp_path))
    server.up_within = 120  # the leader adds the lab's VM slots as it starts
    yield server
    server.close()
    provider = CommandProvider(hooks(tmp_path / "cloud"), state_dir=tmp_path / "leftover")
    for name in provider.list():  # no sshd outlives the test, whatever happened
        provider.destroy(name)


# The tests whose point is the provider, not the database, run on one of the two (alternating):
# each is a server or two and a VM (15 s). The database's own part — the leader's lock, its
# adoption after a kill — runs on both in the killed-server test.
ON_SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
ON_POSTGRES = pytest.mark.parametrize(
    "database_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)


def add_machine(client, fqdn: str) -> None:
    """The lab exists already (the leader made it for its VM slots): add one machine."""
    assert client.post("/labs", json={"name": "lab1"}).status_code in (201, 409)
    assert client.post("/systems", json={"fqdn": fqdn, "lab": "lab1"}).status_code == 201


def libvirt_available(root: Path) -> None:
    """Skip (fail under CI=true) where libvirt cannot boot the small guest."""
    try:
        from labq.dispatch.vms.guest import build
        from labq.dispatch.vms.libvirt import LibvirtProvider

        LibvirtProvider(state_dir=root / "probe").list()
        build()
    except (ImportError, ProviderError) as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"VM tests cannot run: {exc}")
        pytest.skip(str(exc))


@pytest.fixture
def libvirt_lab(tmp_path):
    """On SQLite alone: the database's part is the command provider's tests' (on both), and a
    guest booted under TCG takes a minute."""
    libvirt_available(tmp_path)
    url = f"sqlite:///{tmp_path / 'labq.db'}"
    server = LabServer(url, tmp_path, settings=settings(tmp_path, "libvirt"))
    server.up_within = 120
    yield server
    server.close()
    from labq.dispatch.vms.libvirt import LibvirtProvider

    provider = LibvirtProvider(state_dir=server.data / "vms")
    for name in provider.list():  # no VM outlives the test, whatever happened
        provider.destroy(name)


@pytest.mark.xdist_group("vms")  # one VM booting at a time: TCG wants both cores
def test_a_two_host_job_gets_a_libvirt_vm_for_what_the_lab_lacks(libvirt_lab):
    from labq.dispatch.vms.libvirt import LibvirtProvider

    lab = libvirt_lab
    _, client = lab.start()
    add_machine(client, "a.lab1")
    job_id = submit(client, PAIR_JOB)
    job = wait_until(
        lambda: job_state(client, job_id, "completed", "aborted"), "the job to end", timeout=900
    )
    assert job["state"] == "completed", job
    (task_log,) = lab.data.glob(f"logs/set-*/{SLOT}/task-*-where.log")
    assert f"on {SLOT}" in task_log.read_text()
    provider = LibvirtProvider(state_dir=lab.data / "vms")
    wait_until(lambda: provider.list() == [], "the VM to be destroyed")
    assert_never_double_booked(client, "a.lab1", SLOT)


def vms_of(root: Path) -> list[str]:
    listed = subprocess.run(
        [sys.executable, str(HOOKS), "list", str(root / "cloud")],
        capture_output=True,
        text=True,
        check=True,
    )
    return list(json.loads(listed.stdout))


@ON_POSTGRES
def test_a_two_host_job_gets_a_vm_for_what_the_lab_lacks(lab):
    _, client = lab.start()
    add_machine(client, "a.lab1")
    job_id = submit(client, PAIR_JOB)
    job = wait_until(lambda: job_state(client, job_id, "completed", "aborted"), "the job to end")
    assert job["state"] == "completed", job
    (only,) = job["sets"]
    assert sorted(r["system"] for r in only["recipes"]) == ["a.lab1", SLOT]
    vm_recipe = next(r for r in only["recipes"] if r["system"] == SLOT)
    (task_log,) = lab.data.glob(f"logs/set-*/{SLOT}/task-*-where.log")
    assert f"on {SLOT}" in task_log.read_text()  # it ran in the VM, over SSH
    collected = sorted(p.parent.parent.name for p in lab.data.glob("logs/*/*/collected/vm.txt"))
    assert collected == ["a.lab1", SLOT]  # archived from the machine and from the VM
    for path in lab.data.joinpath("logs").rglob("*"):
        if path.is_file():  # the VM's private key is in no log
            assert "PRIVATE KEY" not in path.read_text(errors="replace")
    wait_until(lambda: vms_of(lab.root) == [], "the VM to be destroyed")
    history = client.get(f"/systems/{SLOT}/history").json()["history"]
    assert any(row["recipe"] == vm_recipe["id"] for row in history)
    assert_never_double_booked(client, "a.lab1", SLOT)


def test_a_failed_creation_aborts_the_recipe_with_the_providers_reason(lab):
    (lab.root / "cloud" / "fail").write_text("no more floating IPs")
    _, client = lab.start()
    add_machine(client, "a.lab1")
    job_id = submit(client, PAIR_JOB)
    job = wait_until(lambda: job_state(client, job_id, "completed", "aborted"), "the job to end")
    assert job["state"] == "aborted"
    (only,) = job["sets"]  # no retry: max_retries is 0
    assert next(r for r in only["recipes"] if r["system"] == SLOT)["state"] == "aborted"
    history = client.get(f"/jobs/{job_id}/history").json()["recipes"]
    (vm_recipe,) = [r for r in history if r["system"] == SLOT]
    reasons = [h["reason"] or "" for h in vm_recipe["history"] if h["state"] == "aborted"]
    assert any("no more floating IPs" in r for r in reasons), vm_recipe
    assert vms_of(lab.root) == []


def test_a_server_killed_while_a_vm_is_made_leaks_no_vm_and_runs_no_set_twice(lab):
    (lab.root / "cloud" / "slow").write_text("3")
    _, client = lab.start()
    add_machine(client, "a.lab1")
    job_id = submit(client, PAIR_JOB)
    wait_until(lambda: any((lab.root / "cloud").glob("*")) and _installing(client, job_id), "a VM")
    lab.procs[0].send_signal(signal.SIGKILL)
    lab.procs[0].wait()
    # a VM no running set owns (a set that ended while its server was down)
    orphan = name_for("vm9.lab1.vms", 999_999)
    stray = CommandProvider(hooks(lab.root / "cloud"), state_dir=lab.root / "stray")
    stray.create(VmRequest(orphan, "lab1"))

    _, client = lab.start()  # the new leader: destroys the orphan, adopts the set's VM
    job = wait_until(lambda: job_state(client, job_id, "completed", "aborted"), "the job to end")
    wait_until(lambda: vms_of(lab.root) == [], "every VM to be destroyed", timeout=60)
    sets = job["sets"]
    runs = [t for s in sets for r in s["recipes"] for t in r["tasks"] if t["status"] != "new"]
    if job["state"] == "completed":
        assert len(sets) == 1  # the supervisor outlived the server: one run, no retry
    assert len([t for t in runs if t.get("result") == "pass"]) <= 2
    assert_never_double_booked(client, "a.lab1", SLOT)


def _installing(client, job_id: int) -> bool:
    job = client.get(f"/jobs/{job_id}").json()
    return any(r["state"] == "installing" for s in job["sets"] for r in s["recipes"])


KEPT_JOB = """
whiteboard: keeps its VM (Beaker's <reservesys>)
recipe_sets:
  - recipes:
      - tasks: [{name: here, run: 'true'}]
      - metadata: {reservesys: {duration: 3600, when: always}}
        host: {hypervisor: KVM}
        tasks: [{name: here, run: 'echo "on $LABQ_FQDN"'}]
"""


@ON_SQLITE
def test_a_vm_under_reservesys_is_kept_until_its_reservation_is_released(lab):
    """Also across a new leader, whose sweep of orphans spares it."""
    _, client = lab.start()
    add_machine(client, "a.lab1")
    job_id = submit(client, KEPT_JOB)
    job = wait_until(lambda: job_state(client, job_id, "completed", "aborted"), "the job to end")
    assert job["state"] == "completed", job
    (only,) = job["sets"]
    (vm_recipe,) = [r for r in only["recipes"] if r["system"] == SLOT]
    kept = name_for(SLOT, only["id"])
    # the recipes end (the job reads completed) one step before their set's end
    # reserves the slot: wait for the state, not for a duration
    reservation = wait_until(
        lambda: client.get(f"/systems/{SLOT}").json()["reservation"], "the slot's reservation"
    )
    assert reservation["recipe"] == vm_recipe["id"]
    assert vms_of(lab.root) == [kept]  # the recipe ended; its VM stays with the slot
    lab.procs[0].send_signal(signal.SIGKILL)
    lab.procs[0].wait()
    _, client = lab.start()  # the new leader's sweep leaves the kept VM
    wait_until(lambda: f"VM {kept} is kept" in lab.logs[-1].read_text(), "the sweep")
    assert vms_of(lab.root) == [kept]
    # the cloud hangs on the destroy: scheduling goes on meanwhile
    (lab.root / "cloud" / "stuck").touch()
    released = client.post(f"/systems/{SLOT}/release")
    assert released.status_code == 200, released.text
    physical = "{host: {fqdn: a.lab1}, tasks: [{name: t, run: 'true'}]}"
    other = submit(client, f"recipe_sets: [{{recipes: [{physical}]}}]")
    done = wait_until(lambda: job_state(client, other, "completed", "aborted"), "the next job")
    assert done["state"] == "completed", done
    assert vms_of(lab.root) == [kept]
    (lab.root / "cloud" / "stuck").unlink()
    wait_until(lambda: vms_of(lab.root) == [], "the kept VM to be destroyed")
    assert client.get(f"/systems/{SLOT}").json()["reservation"] is None


GUEST_JOB = """
whiteboard: a guest recipe (Beaker's <guestrecipe>)
recipe_sets:
  - recipes:
      - host: {{fqdn: a.lab1}}
        tasks: [{{name: host, run: 'echo "host in $PWD"'}}]
        guests:
          - name: g1
            args: --ram=512 --vcpus=1
            tasks:
              - name: inguest
                run: 'until [ -e {go} ]; do sleep 0.2; done; echo "guest in $PWD"'
"""


@ON_POSTGRES
def test_a_guest_recipe_runs_in_a_vm_the_next_leader_adopts(lab):
    """The guest's VM carries its set in its name, so a new leader's sweep of orphans
    leaves it while the set runs; it is destroyed with its host recipe's end."""
    go = lab.root / "go"
    _, client = lab.start()
    add_machine(client, "a.lab1")
    job_id = submit(client, GUEST_JOB.format(go=go))
    made = wait_until(lambda: vms_of(lab.root), "the guest's VM")
    (set_id,) = [s["id"] for s in client.get(f"/jobs/{job_id}").json()["sets"]]
    assert made == [f"labq-g-g1-s-{set_id}"]
    lab.procs[0].send_signal(signal.SIGKILL)
    lab.procs[0].wait()
    _, client = lab.start()
    wait_until(lambda: "which runs: adopted" in lab.logs[-1].read_text(), "the sweep")
    assert vms_of(lab.root) == made  # the running set's guest is not an orphan
    go.touch()
    job = wait_until(lambda: job_state(client, job_id, "completed", "aborted"), "the job to end")
    assert job["state"] == "completed", job
    (guest_log,) = lab.data.glob("logs/set-*/a.lab1/guests/g1/task-*-inguest.log")
    assert f"guest in {lab.root / 'vm-workspace'}" in guest_log.read_text()  # over SSH
    (host_log,) = lab.data.glob("logs/set-*/a.lab1/task-*-host.log")
    assert "vm-workspace" not in host_log.read_text()  # the host recipe ran on a.lab1
    wait_until(lambda: vms_of(lab.root) == [], "the guest's VM to be destroyed")
