"""Guest recipes: a guest of the host's system, made by the lab's guest hook, runs its tasks.

On the local backend a guest is a workspace inside its host's.
"""

import dataclasses
from collections import defaultdict

import pytest

from labq.dispatch.hooks import HookedBackend, HookError, HookSet, render
from labq.dispatch.plan import GuestPlan, RecipePlan, SetPlan
from labq.dispatch.runner import run_set
from labq.domain.states import RecipeState, Result

from .conftest import COMMAND_VMS, GRACE, set_logs, system, task, workspace

R = RecipeState
HOOKS = HookSet(
    guest_create="/bin/sh -c 'echo \"$0 $*\" > created.txt' {guestname} on {hostfqdn} {guestargs}",
    guest_destroy="/bin/sh -c 'echo gone > destroyed.txt' {guestname}",
)


def guest(name, *tasks, role=None, args="--ram=1024 --vcpus=2", host="host1.test"):
    info = dataclasses.replace(system(host), fqdn=name, guest_of=host, guest_args=args)
    return GuestPlan(system=info, tasks=tuple(tasks), role=role)


def host_plan(host_tasks, *guests, role="hosts"):
    recipe = RecipePlan(
        id=1, system=system("host1.test"), tasks=tuple(host_tasks), role=role, guests=guests
    )
    return SetPlan(id=7, job_id=3, recipes=(recipe,))


def run(plan, backend, data_dir, reporter):
    return run_set(
        plan,
        defaultdict(lambda: backend),
        data_dir=data_dir,
        reporter=reporter,
        heartbeat_every=0.2,
    )


@pytest.fixture
def hooked(local):
    return HookedBackend(local, HOOKS, grace=GRACE)


def test_guests_are_made_run_their_tasks_inside_the_host_and_are_destroyed(
    hooked, data_dir, reporter
):
    plan = host_plan(
        [task(1, 'echo "$SERVERS|$CLIENTS|$LABQ_FQDN" > host.txt')],
        guest(
            "vm1", task(2, 'echo "$LABQ_FQDN $LABQ_HOST_FQDN $LABQ_ROLE" > me.txt'), role="servers"
        ),
        guest("vm2", task(3, "echo $SERVERS > peer.txt; exit 77"), role="clients"),
    )
    outcome = run(plan, hooked, data_dir, reporter)

    (recipe,) = outcome.recipes
    assert recipe.state is R.COMPLETED, recipe.reason
    assert recipe.result is Result.WARN  # the worst of the host's and its guests' tasks
    assert sorted(t.task_id for t in recipe.tasks) == [1, 2, 3]
    ws = workspace(data_dir)
    # the roles of guests are exported like any other
    assert (ws / "host.txt").read_text() == "vm1|vm2|host1.test\n"
    logs = set_logs(data_dir) / "host1.test"
    # each guest's log directory is under its host's; its workspace was inside the host's
    assert (logs / "guests/vm1/created.txt").read_text() == (
        "vm1 on host1.test --ram=1024 --vcpus=2\n"
    )
    assert (logs / "guests/vm1/destroyed.txt").read_text() == "gone\n"
    assert reporter.finished(2)[4].parent == logs / "guests" / "vm1"
    assert not (ws / "guests" / "vm1").exists()  # destroyed: the backend wiped it
    log = (set_logs(data_dir) / "supervisor.log").read_text()
    assert log.index("creating guest vm1") < log.index("destroying guest vm1")


def test_a_guests_task_sees_its_own_workspace_and_host(local, data_dir, reporter):
    plan = host_plan(
        [task(1, "true")],
        guest("vm1", task(2, 'pwd > where; echo "$LABQ_HOST_FQDN" >> where; mv where logs/')),
    )
    outcome = run(plan, local, data_dir, reporter)
    assert outcome.state is R.COMPLETED
    where = (set_logs(data_dir) / "host1.test/guests/vm1/collected/where").read_text()
    assert where.splitlines() == [str(workspace(data_dir) / "guests/vm1"), "host1.test"]


def test_a_guest_that_cannot_be_made_aborts_its_recipe_and_its_tasks_never_run(
    local, data_dir, reporter
):
    failing = HookedBackend(local, HookSet(guest_create="/bin/sh -c 'exit 4'"), grace=GRACE)
    plan = host_plan([task(1, "touch host-ran")], guest("vm1", task(2, "touch guest-ran")))
    outcome = run(plan, failing, data_dir, reporter)

    (recipe,) = outcome.recipes
    assert recipe.state is R.ABORTED
    assert "guest vm1 could not be created" in (recipe.reason or "")
    assert "hook guest_create for vm1 failed with exit code 4" in (recipe.reason or "")
    assert reporter.started() == []


def test_a_guest_task_that_times_out_aborts_the_host_recipe(local, data_dir, reporter):
    plan = host_plan([task(1, "sleep 30")], guest("vm1", task(2, "sleep 30", timeout=0.5)))
    outcome = run(plan, local, data_dir, reporter)
    (recipe,) = outcome.recipes
    assert recipe.state is R.ABORTED
    assert "task 2 (t2) on guest vm1 exceeded its timeout" in (recipe.reason or "")
    assert {t.task_id for t in recipe.tasks} == {1, 2}


def test_guest_placeholders_only_in_guest_hooks_and_guestargs_split_without_a_shell():
    with pytest.raises(HookError, match="unknown placeholder"):
        HookSet(reimage="virsh start {guestname}")
    vm = guest("vm1", args="--name 'a b' ; rm -rf /")
    argv = render("guest_create", "virt-install {guestargs} --host={hostfqdn}", vm.system)
    assert argv == ["virt-install", "--name", "a b", ";", "rm", "-rf", "/", "--host=host1.test"]


def test_a_guest_named_like_a_system_of_the_set_is_refused(local, data_dir, reporter):
    plan = host_plan([task(1, "true")], guest("host1.test", task(2, "true")))
    outcome = run(plan, local, data_dir, reporter)
    assert outcome.state is R.ABORTED
    assert "has the name of another system" in (outcome.recipes[0].reason or "")


SSH_LAB = {"backend": "ssh", "ssh": {"user": "root", "port": 2222}}


@pytest.mark.parametrize("vms", [None, COMMAND_VMS], ids=["alone", "beside-vm-slots"])
def test_a_lab_of_hypervisors_makes_each_guest_on_its_host(tmp_path, vms):
    """``labs.NAME.guests``: guests are VMs on their host (reached as the lab's systems are),
    also beside the lab's own VM slots, whose provider then makes no guests."""
    from labq.config import Settings
    from labq.dispatch.supervisor import lab_backends
    from labq.dispatch.vms.backend import VmBackend
    from labq.dispatch.vms.guests import VmGuests

    lab = {**SSH_LAB, "guests": {"dir": "/var/lib/labq/guests", "memory": 300}}
    if vms is not None:
        lab["vms"] = vms
    made = lab_backends(
        Settings.model_validate({"labs": {"lab1": lab}}), tmp_path, {"lab1"}, set_id=9, users=[]
    )["lab1"]
    if vms is not None:
        assert isinstance(made, VmBackend)
        made = made.inner
    assert isinstance(made, VmGuests)
    assert made.provider is None
    assert made.on_host is not None
    assert made.size.memory_mb == 300
    assert not isinstance(made.inner, VmGuests)  # the lab's provider makes no guests here


def test_guests_on_their_hosts_need_a_lab_reached_over_ssh():
    from pydantic import ValidationError

    from labq.config import Settings

    with pytest.raises(ValidationError, match="backend: ssh"):
        Settings.model_validate({"labs": {"lab1": {"guests": {}}}})
    with pytest.raises(ValidationError, match="dir"):
        Settings.model_validate({"labs": {"lab1": {**SSH_LAB, "guests": {"dir": "guests"}}}})
