import itertools
import threading
import time
from collections import defaultdict

import pytest

from labq.dispatch.environment import check_plan
from labq.dispatch.hooks import HookedBackend, HookSet
from labq.dispatch.plan import PlanError, RecipePlan, SetPlan
from labq.dispatch.procs import process_alive
from labq.dispatch.results import WARN_EXIT
from labq.dispatch.runner import run_set
from labq.domain.states import RecipeState, Result

from .conftest import (
    FULL_RUN,
    GRACE,
    RecordingReporter,
    one_recipe,
    set_logs,
    system,
    task,
    workspace,
)

R = RecipeState


def run(plan, backend, data_dir, reporter, **kw):
    kw.setdefault("heartbeat_every", 0.2)
    return run_set(plan, defaultdict(lambda: backend), data_dir=data_dir, reporter=reporter, **kw)


def two_host_plan(server_tasks, client_tasks, **kw):
    server = RecipePlan(id=1, role="servers", system=system("srv1.test"), tasks=server_tasks)
    client = RecipePlan(id=2, role="clients", system=system("cli1.test"), tasks=client_tasks)
    return SetPlan(id=7, job_id=3, recipes=(server, client), **kw)


def test_two_recipes_run_together_and_see_each_others_roles(local, data_dir, reporter):
    plan = two_host_plan(
        (
            task(11, 'echo "$CLIENTS" > clients.txt; echo server-side > "$LABQ_LOG_DIR/extra.log"'),
            task(12, 'echo "$LABQ_ROLE $LABQ_FQDN $LABQ_ROLES" > me.txt'),
        ),
        (task(21, 'echo "$SERVERS" > servers.txt; env > env.txt'),),
    )
    outcome = run(plan, local, data_dir, reporter)

    assert outcome.state is R.COMPLETED
    assert outcome.result is Result.PASS
    assert (workspace(data_dir, "srv1.test") / "clients.txt").read_text() == "cli1.test\n"
    assert (workspace(data_dir, "cli1.test") / "servers.txt").read_text() == "srv1.test\n"
    me = (workspace(data_dir, "srv1.test") / "me.txt").read_text()
    assert me == "servers srv1.test SERVERS CLIENTS\n"
    env = dict(
        line.split("=", 1)
        for line in (workspace(data_dir, "cli1.test") / "env.txt").read_text().splitlines()
        if "=" in line
    )
    assert env["LABQ_JOB_ID"] == "3"
    assert env["LABQ_SET_ID"] == "7"
    assert env["LABQ_RECIPE_ID"] == "2"
    assert env["LABQ_TASK_ID"] == "21"
    assert env["LABQ_TASK_NAME"] == "t21"
    assert env["LABQ_FQDN"] == "cli1.test"
    assert env["LABQ_WORKSPACE"] == str(workspace(data_dir, "cli1.test"))
    assert "LABQ_REF_COMMIT" not in env
    for recipe_id in (1, 2):
        assert reporter.states(recipe_id) == [*FULL_RUN, R.COMPLETED]
    assert reporter.started() in ([11, 21, 12], [11, 12, 21], [21, 11, 12])
    logs = set_logs(data_dir)
    assert (logs / "srv1.test" / "collected" / "extra.log").read_text() == "server-side\n"
    assert sorted(p.name for p in (logs / "srv1.test").glob("task-*.log")) == [
        "task-11-t11.log",
        "task-12-t12.log",
    ]
    assert (logs / "supervisor.log").exists()
    assert not any(r.cleaned_up for r in outcome.recipes)


def test_exit_codes_give_results_and_a_failing_task_does_not_stop_its_recipe(
    local, data_dir, reporter
):
    plan = one_recipe(task(1, "exit 3"), task(2, f"exit {WARN_EXIT}"), task(3, "echo ok"))
    outcome = run(plan, local, data_dir, reporter)

    recipe = outcome.recipe(1)
    assert recipe.state is R.COMPLETED
    assert [t.result for t in recipe.tasks] == [Result.FAIL, Result.WARN, Result.PASS]
    assert [t.exit_code for t in recipe.tasks] == [3, WARN_EXIT, 0]
    assert recipe.result is Result.FAIL
    assert reporter.finished(1)[2] == 3
    assert reporter.finished(1)[3] is Result.FAIL
    assert reporter.finished(1)[5] == "exit code 3"
    assert recipe.cleaned_up  # a failed test is a failure: the system is cleaned up
    assert not workspace(data_dir).exists()


def test_task_timeout_kills_the_whole_process_group_and_aborts_the_recipe(
    local, data_dir, reporter
):
    slow = task(
        1,
        "echo before; sh -c 'sleep 100 & echo $! > bg.pid; echo $$ > sh.pid; sleep 100'",
        timeout=1,
    )
    plan = one_recipe(slow, task(2, "touch never.txt"))
    started = time.monotonic()
    outcome = run(plan, local, data_dir, reporter)
    took = time.monotonic() - started

    recipe = outcome.recipe(1)
    assert recipe.state is R.ABORTED
    assert recipe.reason == "task 1 (t1) exceeded its timeout of 1 s"
    assert recipe.tasks[0].timed_out
    assert recipe.tasks[0].result is Result.FAIL
    assert reporter.started() == [1]
    assert reporter.states(1)[-1] is R.ABORTED
    assert took < 60  # ended at its timeout, not after its 100 s (loose: a loaded machine)
    # the logs were archived before the clean-up wiped the workspace
    log = (set_logs(data_dir) / "host1.test" / "task-1-t1.log").read_text()
    assert "before" in log
    assert "timed out after 1 s" in log
    assert recipe.cleaned_up


def test_grandchildren_are_dead_after_a_timeout(local, data_dir, reporter, tmp_path):
    pids = tmp_path / "pids"
    cmd = f"sh -c 'sleep 100 & echo $! > {pids}; sleep 100'"
    outcome = run(one_recipe(task(1, cmd, timeout=0.5)), local, data_dir, reporter)
    assert outcome.recipe(1).state is R.ABORTED
    grandchild = int(pids.read_text())
    assert not process_alive(grandchild)


def test_max_time_aborts_everything_archives_logs_then_cleans_up(data_dir, reporter, tmp_path):
    calls = tmp_path / "calls.log"
    hook = tmp_path / "hook.sh"
    hook.write_text(f'#!/bin/sh\necho "cleanup-hook $1" >> {calls}\n')
    hook.chmod(0o755)

    from labq.dispatch.backends.local import LocalBackend

    class Recording(HookedBackend):
        def collect_logs(self, system, dest):
            with calls.open("a") as f:
                f.write(f"collect {system.fqdn}\n")
            super().collect_logs(system, dest)

    backend = Recording(
        LocalBackend(data_dir, grace=GRACE), HookSet(cleanup=f"{hook} {{fqdn}}"), grace=GRACE
    )
    plan = two_host_plan(
        (task(11, "echo started-11; sleep 100"),),
        (task(21, "echo started-21; sleep 100"),),
        max_time=1,
    )
    started = time.monotonic()
    outcome = run(plan, backend, data_dir, reporter)
    assert time.monotonic() - started < 60  # at max_time, not after 100 s (loose on purpose)

    for recipe in outcome.recipes:
        assert recipe.state is R.ABORTED
        assert recipe.reason == "exceeded max_time of 1 s"
        assert recipe.tasks[0].result is Result.FAIL
        assert recipe.tasks[0].stopped
        assert recipe.cleaned_up
        log = recipe.log_dir / f"task-{recipe.tasks[0].task_id}-t{recipe.tasks[0].task_id}.log"
        assert "started-" in log.read_text()
        assert (recipe.log_dir / "hook-cleanup.log").exists()
    lines = calls.read_text().splitlines()
    assert sorted(lines[:2]) == ["collect cli1.test", "collect srv1.test"]
    assert sorted(lines[2:]) == ["cleanup-hook cli1.test", "cleanup-hook srv1.test"]
    assert outcome.state is R.ABORTED


def test_a_failing_reimage_hook_aborts_the_set_and_names_the_hook(local, data_dir, reporter):
    backend = HookedBackend(local, HookSet(reimage="/bin/sh -c 'echo no image; exit 3'"))
    plan = two_host_plan((task(11, "true"),), (task(21, "true"),))
    outcome = run(plan, backend, data_dir, reporter)

    assert outcome.state is R.ABORTED
    for recipe in outcome.recipes:
        assert recipe.state is R.ABORTED
        assert "hook reimage for" in recipe.reason
        assert "failed with exit code 3" in recipe.reason
    assert reporter.started() == []
    # one recipe's own failure names its system; the other is aborted with the set
    reasons = sorted(r.reason for r in outcome.recipes)
    assert any(r.startswith("provisioning failed: hook reimage for") for r in reasons)
    assert (set_logs(data_dir) / "srv1.test" / "hook-reimage.log").read_text().count("no image")


def test_named_task_without_command_warns_when_the_workspace_lacks_it(local, data_dir, reporter):
    plan = one_recipe(
        task(1, None, name="/distribution/check-install"), task(2, None, name="install")
    )
    outcome = run(plan, local, data_dir, reporter)

    recipe = outcome.recipe(1)
    assert recipe.state is R.COMPLETED
    assert [t.result for t in recipe.tasks] == [Result.WARN, Result.WARN]
    assert recipe.tasks[0].message == (
        "no command and no tasks/distribution/check-install/run in the workspace"
    )
    assert recipe.tasks[1].message == "no command and no tasks/install/run in the workspace"
    assert reporter.finished(2)[5] == "no command and no tasks/install/run in the workspace"


def test_named_task_runs_from_the_pinned_workspace(local, data_dir, reporter, task_repo):
    from .conftest import git_out

    commit = git_out("rev-parse", "HEAD", cwd=task_repo)
    plan = one_recipe(
        task(1, None, name="install", params={"PACKAGE": "ceph"}),
        ref_repo=task_repo.as_uri(),
        ref_commit=commit,
    )
    outcome = run(plan, local, data_dir, reporter)

    assert outcome.result is Result.PASS
    assert (workspace(data_dir) / "installed.txt").read_text() == f"ref={commit} pkg=ceph\n"


@pytest.mark.parametrize("name", ["PATH", "LD_PRELOAD", "LABQ_FQDN", "LABQ_ANYTHING", "BAD-NAME"])
def test_params_that_would_override_the_environment_are_refused(name, local, data_dir, reporter):
    plan = one_recipe(task(1, "touch ran.txt", params={name: "/tmp/evil"}))
    with pytest.raises(PlanError, match=f"parameter '{name}'"):
        check_plan(plan)

    outcome = run(plan, local, data_dir, reporter)
    recipe = outcome.recipe(1)
    assert recipe.state is R.ABORTED
    assert f"parameter '{name}'" in recipe.reason
    assert "task 1 (t1) of recipe 1" in recipe.reason
    assert reporter.started() == []
    assert not (workspace(data_dir) / "ran.txt").exists()


def test_path_override_error_says_what_is_wrong():
    plan = one_recipe(task(1, "true", params={"PATH": "/x"}))
    with pytest.raises(PlanError, match="would override PATH"):
        check_plan(plan)


def test_cancel_stops_running_tasks(local, data_dir, reporter, tmp_path):
    cancel = threading.Event()
    pids = tmp_path / "pid"
    plan = one_recipe(task(1, f"echo $$ > {pids}; sleep 100"), task(2, "touch never.txt"))
    result = {}
    runner = threading.Thread(
        target=lambda: result.update(out=run(plan, local, data_dir, reporter, cancel=cancel))
    )
    started = time.monotonic()
    runner.start()
    while not pids.exists() or not pids.read_text().strip():
        assert time.monotonic() - started < 60
        time.sleep(0.02)
    cancel.set()
    runner.join(10)
    assert not runner.is_alive()

    recipe = result["out"].recipe(1)
    assert recipe.state is R.CANCELLED
    assert recipe.reason == "cancelled"
    assert recipe.tasks[0].result is Result.WARN
    assert recipe.tasks[0].message == "cancelled"
    assert recipe.result is Result.WARN
    assert reporter.started() == [1]
    assert reporter.states(1)[-1] is R.CANCELLED
    assert not process_alive(int(pids.read_text()))


def test_heartbeats_come_periodically_while_running(local, data_dir, reporter):
    run(one_recipe(task(1, "sleep 1")), local, data_dir, reporter, heartbeat_every=0.1)
    beats = reporter.heartbeats
    assert len(beats) >= 6
    gaps = [b - a for a, b in itertools.pairwise(beats)]
    assert max(gaps) < 0.5


def test_secrets_never_reach_a_log_file(local, data_dir, reporter):
    token = "tok-3f9a8c2e1d"
    plan = one_recipe(
        task(
            1,
            'echo "token is $LABQ_TOKEN"; printf %s "$LABQ_TOKEN" >&2; '
            'echo "$LABQ_TOKEN" > "$LABQ_LOG_DIR/leak.txt"; exit 3',
            name=f"uses {token}",
        ),
        env={"LABQ_TOKEN": token},
    )
    outcome = run(plan, local, data_dir, reporter)
    assert outcome.recipe(1).tasks[0].exit_code == 3

    files = [p for p in set_logs(data_dir).rglob("*") if p.is_file()]
    assert len(files) >= 3
    for path in files:
        assert token not in path.read_text(), path
    task_log = next(p for p in files if p.name.startswith("task-1"))
    assert "token is [secret]" in task_log.read_text()
    assert (set_logs(data_dir) / "host1.test" / "collected" / "leak.txt").read_text() == (
        "[secret]\n"
    )
    assert all(token not in str(e) for e in reporter.events)


def test_two_recipes_on_one_system_are_refused(local, data_dir, reporter):
    a = RecipePlan(id=1, system=system("same.test"), tasks=(task(1, "true"),))
    b = RecipePlan(id=2, system=system("same.test"), tasks=(task(2, "true"),))
    outcome = run(SetPlan(id=7, job_id=3, recipes=(a, b)), local, data_dir, reporter)
    assert {r.state for r in outcome.recipes} == {R.ABORTED}
    assert "given to two recipes" in outcome.recipes[0].reason


def test_a_reporter_that_fails_does_not_stop_the_run(local, data_dir, reporter):
    class Broken(type(reporter)):
        def task_started(self, task_id):
            raise RuntimeError("database is down")

    outcome = run(one_recipe(task(1, "true")), local, data_dir, Broken())
    assert outcome.state is R.COMPLETED
    assert any("database is down" in e for e in outcome.reporter_errors)


def test_a_ref_without_its_commit_is_refused(local, data_dir, reporter, task_repo):
    plan = one_recipe(task(1, "true"), ref_repo=task_repo.as_uri())
    outcome = run(plan, local, data_dir, reporter)
    assert outcome.recipe(1).state is R.ABORTED
    assert "needs both its repository and its commit" in outcome.recipe(1).reason


def test_a_ref_that_cannot_be_checked_out_aborts_the_set(local, data_dir, reporter, task_repo):
    plan = one_recipe(task(1, "true"), ref_repo=task_repo.as_uri(), ref_commit="1" * 40)
    outcome = run(plan, local, data_dir, reporter)
    assert outcome.recipe(1).state is R.ABORTED
    assert outcome.recipe(1).reason.startswith("cannot check out the pinned ref: commit 1111")
    assert reporter.started() == []


def test_no_heartbeat_comes_while_or_after_the_final_states_are_written(local, data_dir):
    # a heartbeat after the set's end finds it ended, and would take it for a lost claim
    class Ordered(RecordingReporter):
        def heartbeat(self):
            self._add("beat")

        def recipe_state(self, recipe_id, state, reason=None):
            super().recipe_state(recipe_id, state, reason)
            if state in (R.COMPLETED, R.ABORTED, R.CANCELLED):
                time.sleep(0.05)  # ten beats' time: one would come now if it could

    reporter = Ordered()
    run(one_recipe(task(1, "true")), local, data_dir, reporter, heartbeat_every=0.005)
    kinds = [e[0] for e in reporter.events]
    assert "beat" in kinds
    final = next(
        i for i, e in enumerate(reporter.events) if e[0] == "state" and e[2] is R.COMPLETED
    )
    assert "beat" not in kinds[final:]
