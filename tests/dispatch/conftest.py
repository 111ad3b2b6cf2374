import subprocess
import threading
import time
from pathlib import Path

import pytest

from labq.dispatch.backends.local import LocalBackend
from labq.dispatch.plan import RecipePlan, SetPlan, SystemInfo, TaskPlan
from labq.domain.states import RecipeState

GRACE = 0.5
# a lab's VM provider in settings (labs.NAME.vms), the command kind, whose hooks do nothing
COMMAND_VMS = {
    "kind": "command",
    "max_vms": 1,
    "max_vcpus": 1,
    "max_memory": 1024,
    "sizes": [{"name": "s", "cpus": 1, "memory": 1024}],
    "command": {"create": ["true"], "destroy": ["true"], "list": ["true"]},
}


class RecordingReporter:
    """Keeps every callback, in order, with the time it came."""

    def __init__(self):
        self.events = []
        self.heartbeats = []
        self._lock = threading.Lock()

    def _add(self, *event):
        with self._lock:
            self.events.append(event)

    def recipe_state(self, recipe_id, state, reason=None):
        self._add("state", recipe_id, state, reason)

    def task_started(self, task_id):
        self._add("started", task_id)

    def task_finished(self, task_id, exit_code, result, log_path, message):
        self._add("finished", task_id, exit_code, result, Path(log_path), message)

    def heartbeat(self):
        with self._lock:
            self.heartbeats.append(time.monotonic())

    def log(self, message):
        self._add("log", message)

    def states(self, recipe_id):
        return [e[2] for e in self.events if e[0] == "state" and e[1] == recipe_id]

    def started(self):
        return [e[1] for e in self.events if e[0] == "started"]

    def finished(self, task_id):
        return next(e for e in self.events if e[0] == "finished" and e[1] == task_id)


@pytest.fixture
def reporter():
    return RecordingReporter()


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path / "data"


@pytest.fixture
def local(data_dir):
    return LocalBackend(data_dir, grace=GRACE)


def system(fqdn, **attributes):
    return SystemInfo(fqdn=fqdn, lab="lab1", attributes=attributes)


def task(task_id, command, name=None, **kw):
    return TaskPlan(id=task_id, name=name or f"t{task_id}", command=command, **kw)


def one_recipe(*tasks, fqdn="host1.test", role=None, **set_kw):
    recipe = RecipePlan(id=1, role=role, system=system(fqdn), tasks=tuple(tasks))
    return SetPlan(id=7, job_id=3, recipes=(recipe,), **set_kw)


def workspace(data_dir, fqdn="host1.test"):
    return data_dir / "workspaces" / fqdn


def set_logs(data_dir, set_id=7):
    return data_dir / "logs" / f"set-{set_id}"


FULL_RUN = [RecipeState.WAITING, RecipeState.INSTALLING, RecipeState.RUNNING]


def git(*args, cwd):
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.test", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def git_out(*args, cwd):
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def task_repo(tmp_path):
    """A git repository of tasks: tasks/install/run prints its ref and a parameter."""
    repo = tmp_path / "tasks-repo"
    run = repo / "tasks" / "install" / "run"
    run.parent.mkdir(parents=True)
    run.write_text('#!/bin/sh\necho "ref=$LABQ_REF_COMMIT pkg=$PACKAGE" > installed.txt\n')
    run.chmod(0o755)
    (repo / "README").write_text("v1\n")
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", ".", cwd=repo)
    git("commit", "-q", "-m", "v1", cwd=repo)
    return repo
