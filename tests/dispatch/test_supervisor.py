"""The supervisor process against a real SQLite database: runs, timeouts, stops, kills.

Every supervisor here is a real ``python -m labq.dispatch.supervisor`` subprocess.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from labq.config import Settings
from labq.dispatch import containment
from labq.dispatch.procs import process_alive
from labq.domain.job import JobSpec
from labq.domain.model import System
from labq.domain.states import RecipeState, Result, Usage
from labq.store import Repository, make_engine, reading, transaction, upgrade
from tests.processes import kill_under

HEARTBEAT = 0.2
LAB = "lab1"


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "labq.db"
    upgrade(f"sqlite:///{path}")
    return path


@dataclass
class Lab:
    """A migrated database with a lab, two local systems and a user; settings to run sets."""

    url: str
    engine: Engine
    settings: Settings
    config: Path
    data_dir: Path

    def repo(self) -> Any:
        return transaction(self.engine)

    def read(self) -> Any:
        return reading(self.engine)

    def started_set(self, *recipes: dict[str, Any], max_time: int | None = None) -> int:
        """A submitted set whose recipes are scheduled on s1, s2, … and started."""
        now = datetime.now(UTC)
        recipe_set: dict[str, Any] = {"recipes": list(recipes)}
        if max_time is not None:
            recipe_set["max_time"] = max_time
        spec = JobSpec.model_validate({"recipe_sets": [recipe_set]})
        with self.repo() as repo:
            job_id = repo.queue.submit_job(spec, owner="alice", now=now, source_format="native")
            view = repo.jobs.load_job(job_id).sets[0]
            for i, recipe in enumerate(view.recipes, start=1):
                repo.moves.move_recipe(
                    recipe.id, RecipeState.SCHEDULED, now=now, system=f"s{i}.test"
                )
            repo.supervisors.start_recipe_set(view.id, lab=LAB, now=now)
        return view.id

    def claim(self, set_id: int) -> str:
        """Claim a started set, as the scheduler does when it starts one; the token."""
        token = f"test-claim-{set_id}-{time.monotonic_ns()}"
        with self.repo() as repo:
            assert repo.supervisors.claim_set(set_id, token, now=datetime.now(UTC))
        return token

    def command(self, set_id: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "labq.dispatch.supervisor",
            "--db",
            self.url,
            "--set",
            str(set_id),
            "--config",
            str(self.config),
            "--data-dir",
            str(self.data_dir),
        ]

    def supervise(self, set_id: int, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(set_id), capture_output=True, text=True, timeout=timeout, check=False
        )

    def popen(self, set_id: int) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.command(set_id),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def workspace(self, fqdn: str) -> Path:
        return self.data_dir / "workspaces" / fqdn

    def logs(self, set_id: int) -> Path:
        return self.data_dir / "logs" / f"set-{set_id}"


@pytest.fixture
def lab(tmp_path: Path, sqlite_template: Path) -> Iterator[Lab]:
    path = tmp_path / "labq.db"
    shutil.copyfile(sqlite_template, path)
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    now = datetime.now(UTC)
    with transaction(engine) as repo:
        repo.systems.add_lab(LAB, actor="root", now=now)
        repo.people.add_user("alice", actor="root", now=now)
        for fqdn in ("s1.test", "s2.test", "s3.test"):
            repo.systems.add_system(System(fqdn, LAB), actor="root", now=now)
    data_dir = tmp_path / "data"
    settings = Settings(data_dir=str(data_dir), heartbeat_every=HEARTBEAT)
    config = tmp_path / "labq.yaml"
    config.write_text(json.dumps({"heartbeat_every": HEARTBEAT, "data_dir": str(data_dir)}))
    yield Lab(url, engine, settings, config, data_dir)
    engine.dispose()
    kill_under(tmp_path)  # supervisors and tasks a failed test left (sessions of their own)


def wait_for(check: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def task_running(lab: Lab, set_id: int) -> bool:
    with lab.read() as repo:
        view = repo.jobs.get_recipe_set(set_id)
    return any(t.status == "running" for r in view.recipes for t in r.tasks)


def history(repo: Repository, recipe_id: int) -> list[RecipeState]:
    return [h.state for h in repo.moves.recipe_history(recipe_id)]


RUN = [
    RecipeState.NEW,
    RecipeState.SCHEDULED,
    RecipeState.WAITING,
    RecipeState.INSTALLING,
    RecipeState.RUNNING,
]


# --- tests ---------------------------------------------------------------------------


def test_a_two_recipe_set_runs_and_the_database_shows_it(lab: Lab) -> None:
    set_id = lab.started_set(
        {
            "role": "servers",
            "tasks": [
                {"name": "roles", "run": 'echo "$SERVERS|$CLIENTS|$LABQ_ROLE" > roles.txt'},
                {"name": "skip", "run": "exit 77"},
            ],
        },
        {
            "role": "clients",
            "tasks": [
                {"name": "peer", "run": 'echo "server is $SERVERS" > peer.txt'},
                {"name": "fails", "run": "echo broken; exit 3"},
            ],
        },
    )
    done = lab.supervise(set_id)
    assert done.returncode == 0, done.stderr
    assert "ended completed" in done.stdout
    assert (lab.workspace("s1.test") / "roles.txt").read_text() == "s1.test|s2.test|servers\n"

    with lab.read() as repo:
        view = repo.jobs.get_recipe_set(set_id)
        first, second = view.recipes
        assert [r.state for r in view.recipes] == [RecipeState.COMPLETED] * 2
        assert (first.result, second.result) == (Result.WARN, Result.FAIL)
        assert [(t.status, t.exit_code, t.result) for t in first.tasks] == [
            ("completed", 0, Result.PASS),
            ("completed", 77, Result.WARN),
        ]
        assert second.tasks[1].exit_code == 3
        assert second.tasks[1].message == "exit code 3"
        for recipe in view.recipes:
            assert recipe.log_dir == str(lab.logs(set_id) / recipe.system)
            for t in recipe.tasks:
                assert t.log_path is not None
                assert Path(t.log_path).parent == Path(recipe.log_dir)
                assert t.started_at is not None
                assert t.finished_at is not None
            assert history(repo, recipe.id) == [*RUN, RecipeState.COMPLETED]
        assert "broken" in Path(second.tasks[1].log_path or "").read_text()
        # the supervisor recorded itself and heart-beat; the systems were released
        assert view.supervisor_pid is not None
        assert view.heartbeat_at is not None
        assert view.heartbeat_at >= view.started_at
        assert view.finished_at is not None
        assert {repo.systems.get_system(f).usage for f in ("s1.test", "s2.test")} == {Usage.PENDING}
    # the failing recipe's system was cleaned up, the passing one kept
    assert not lab.workspace("s2.test").exists()
    assert (lab.logs(set_id) / "supervisor.log").is_file()


def test_a_task_that_overruns_its_timeout_aborts_the_set_and_logs_are_kept(lab: Lab) -> None:
    set_id = lab.started_set(
        {
            "tasks": [
                {
                    "name": "note",
                    "run": 'mkdir -p "$LABQ_LOG_DIR" && echo kept > "$LABQ_LOG_DIR/n"',
                },
                {"name": "hang", "run": "sleep 300", "timeout": 1},
                {"name": "never", "run": "true"},
            ]
        }
    )
    started = time.monotonic()
    done = lab.supervise(set_id, timeout=240)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 120  # ended at its timeout, not after its 300 s
    with lab.read() as repo:
        (recipe,) = repo.jobs.get_recipe_set(set_id).recipes
        assert recipe.state is RecipeState.ABORTED
        assert recipe.result is Result.FAIL
        note, hang, never = recipe.tasks
        assert (note.status, hang.status, never.status) == ("completed", "aborted", "aborted")
        assert hang.message is not None
        assert hang.message.startswith("timed out after 1 s")
        reason = repo.moves.recipe_history(recipe.id)[-1].reason
        assert reason == f"task {hang.id} (hang) exceeded its timeout of 1 s"
        assert repo.systems.get_system("s1.test").usage is Usage.PENDING
    logs = lab.logs(set_id) / "s1.test"
    assert (logs / "collected" / "n").read_text() == "kept\n"
    assert (logs / f"task-{hang.id}-hang.log").is_file()
    assert not lab.workspace("s1.test").exists()  # cleaned up after archiving


def test_a_stop_request_stops_the_supervisor_at_its_next_heartbeat(lab: Lab) -> None:
    set_id = lab.started_set({"tasks": [{"name": "long", "run": "sleep 30"}]})
    proc = lab.popen(set_id)
    try:
        wait_for(lambda: task_running(lab, set_id), what="the task to run")
        with lab.repo() as repo:
            assert repo.supervisors.request_stop(set_id, "cancelled by alice")
        proc.wait(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    _, err = proc.communicate()
    assert proc.returncode == 0, err
    with lab.read() as repo:
        (recipe,) = repo.jobs.get_recipe_set(set_id).recipes
        assert recipe.state is RecipeState.CANCELLED
        assert recipe.tasks[0].status == "cancelled"
        assert recipe.result is Result.WARN


def test_a_set_that_cannot_run_is_left_to_the_server(lab: Lab) -> None:
    now = datetime.now(UTC)
    spec = JobSpec.model_validate({"recipe_sets": [{"recipes": [{"tasks": [{"name": "t"}]}]}]})
    with lab.repo() as repo:
        job_id = repo.queue.submit_job(spec, owner="alice", now=now, source_format="native")
        view = repo.jobs.load_job(job_id).sets[0]
        repo.moves.move_recipe(view.recipes[0].id, RecipeState.SCHEDULED, now=now, system="s1.test")
    done = lab.supervise(view.id)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"labq supervisor: set {view.id} cannot run: "
        f"recipe set {view.id} has not been started by the scheduler"
    ]
    with lab.read() as repo:
        assert repo.jobs.get_recipe_set(view.id).recipes[0].state is RecipeState.SCHEDULED
    missing = lab.supervise(view.id + 100)
    assert missing.returncode == 1
    assert f"no recipe set {view.id + 100}" in missing.stderr


def test_a_killed_supervisor_leaves_a_stale_heartbeat_and_its_tasks_are_reaped(
    lab: Lab, tmp_path: Path
) -> None:
    pid_file = tmp_path / "task.pid"
    # the task leaves its process group and session: only its run mark still finds it
    set_id = lab.started_set(
        {"tasks": [{"name": "long", "run": f"setsid sh -c 'echo $$ > {pid_file}; sleep 30'"}]}
    )
    proc = lab.popen(set_id)
    try:
        wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), what="the task")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.communicate()
    task_pid = int(pid_file.read_text())
    assert process_alive(task_pid)  # a bare supervisor process: nothing contained its tasks
    with lab.read() as repo:
        view = repo.jobs.get_recipe_set(set_id)
        claim = repo.supervisors.claim_of(set_id)
    assert claim is not None
    assert containment.reap(containment.run_mark(claim)) >= 1  # what the dispatcher does
    assert not process_alive(task_pid)
    last = view.heartbeat_at
    assert last is not None
    time.sleep(3 * HEARTBEAT)
    with lab.read() as repo:
        assert repo.jobs.get_recipe_set(set_id).heartbeat_at == last  # nobody beats any more
        assert repo.supervisors.stale_supervisors(
            older_than=last + timedelta(seconds=HEARTBEAT)
        ) == [set_id]
        assert repo.jobs.get_recipe_set(set_id).recipes[0].state is RecipeState.RUNNING


def test_a_second_supervisor_of_a_claimed_set_touches_nothing(lab: Lab, tmp_path: Path) -> None:
    runs, done = tmp_path / "runs", tmp_path / "done"
    # the task runs until the test says it is done: the second supervisor meets it running
    # however long that one takes to start
    wait = f"echo run >> {runs}; while [ ! -e {done} ]; do sleep 0.05; done"
    set_id = lab.started_set({"tasks": [{"name": "once", "run": wait}]})
    first = lab.popen(set_id)
    try:
        wait_for(lambda: task_running(lab, set_id), what="the first supervisor's task")
        with lab.read() as repo:
            before = [
                h.state
                for h in repo.moves.recipe_history(repo.jobs.get_recipe_set(set_id).recipes[0].id)
            ]
        second = lab.supervise(set_id, timeout=120)
        assert second.returncode == 3, second.stderr
        assert "claimed by another supervisor" in second.stderr
        with lab.read() as repo:
            recipe = repo.jobs.get_recipe_set(set_id).recipes[0]
            assert [h.state for h in repo.moves.recipe_history(recipe.id)] == before
            assert recipe.state is RecipeState.RUNNING  # the first one's task still runs
        done.touch()
        first.wait(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
        first.communicate()
    assert runs.read_text() == "run\n"  # it ran once
    with lab.read() as repo:
        assert repo.jobs.get_recipe_set(set_id).recipes[0].state is RecipeState.COMPLETED


def test_a_supervisor_whose_claim_was_replaced_before_it_took_it_up_exits(lab: Lab) -> None:
    set_id = lab.started_set({"tasks": [{"name": "t", "run": "true"}]})
    old = lab.claim(set_id)
    with lab.repo() as repo:  # a new leader re-launches the set: the old launch is void
        assert repo.supervisors.claim_set(set_id, "fresh", now=datetime.now(UTC), replacing=old)
    late = subprocess.run(
        [*lab.command(set_id), "--secrets-on-stdin"],
        input=json.dumps({"database": lab.url, "claim": old, "pid": 4242}) + "\n",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert late.returncode == 3, late.stderr
    assert "another supervisor holds it" in late.stderr
    with lab.read() as repo:
        view = repo.jobs.get_recipe_set(set_id)
        assert view.supervisor_pid is None
        assert [r.state for r in view.recipes] == [RecipeState.SCHEDULED]


def test_a_supervisor_that_finds_its_set_ended_stops_its_tasks_and_writes_nothing(
    lab: Lab, tmp_path: Path
) -> None:
    pid_file = tmp_path / "task.pid"
    set_id = lab.started_set(
        {"tasks": [{"name": "long", "run": f"echo $$ > {pid_file}; exec sleep 30"}]}
    )
    proc = lab.popen(set_id)
    try:
        wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), what="the task")
        now = datetime.now(UTC)
        with lab.repo() as repo:  # the server gave up on it (as after a stale heartbeat)
            repo.supervisors.request_stop(set_id, "the supervisor stopped heart-beating")
            (recipe,) = repo.jobs.get_recipe_set(set_id).recipes
            repo.moves.move_recipe(recipe.id, RecipeState.ABORTED, now=now, reason="given up")
        proc.wait(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    _, err = proc.communicate()
    assert proc.returncode == 3, err
    assert not process_alive(int(pid_file.read_text()))
    with lab.read() as repo:
        (recipe,) = repo.jobs.get_recipe_set(set_id).recipes
        assert recipe.state is RecipeState.ABORTED
        assert [h.reason for h in repo.moves.recipe_history(recipe.id)][-1] == "given up"
        assert recipe.tasks[0].status == "aborted"  # ended with its recipe, by the server
