"""Real teuthology jobs with targets and overrides, run end to end by ``labq server``.

The job files are read from ../shared/real-jobs/teuthology where they are. The
systems are named like the files' targets (``ubuntu@<host1>`` runs on ``<host1>``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.realjobs import REAL_JOBS, require

TARGETS = ["<host1>", "<host2>", "<host3>"]
# (file, the roles of each machine, the task names every machine runs in order)
JOBS = [
    (
        "teuthology-example-3node-ceph.yaml",
        ["mon.0+mds.0+osd.0", "mon.1+osd.1", "mon.2+client.0"],
        ["install", "ceph", "kclient", "interactive"],
    ),
    (
        "teuthology-example-3node-rgw.yaml",
        ["mon.a+mon.c+osd.0", "mon.b+mds.a+osd.1", "client.0"],
        ["install", "ceph", "rgw", "interactive"],
    ),
    (
        "teuthology-example-parallel.yaml",
        ["test0+test1", "test0+test1", "test0"],
        ["install", "parallel_example"],
    ),
]


@pytest.fixture(autouse=True)
def folder() -> Path:
    """The real files; checked before any server starts (every test here reads them)."""
    return require(REAL_JOBS / "teuthology")


@pytest.fixture
def as_user(labq, live_server):
    """``labq`` against the live server as its admin; fails on a non-zero exit."""

    def run(*args: str) -> Any:
        env = {"LABQ_URL": live_server.url, "LABQ_TOKEN": live_server.token}
        result = labq(*args, env=env, timeout=120)
        assert result.returncode == 0, (args, result.stderr)
        return result

    return run


@pytest.fixture
def targets(as_user) -> None:
    as_user("lab", "add", "lab1")
    for fqdn in [*TARGETS, "spare.lab1"]:
        as_user("system", "add", fqdn, "--lab", "lab1")


def recipes_of(results: dict[str, Any]) -> list[dict[str, Any]]:
    (rset,) = results["sets"]
    return list(rset["recipes"])


@pytest.mark.usefixtures("targets")
@pytest.mark.parametrize(("name", "roles", "tasks"), JOBS, ids=[j[0] for j in JOBS])
def test_a_real_job_runs_on_its_targets(as_user, folder, name, roles, tasks):
    done = as_user("job", "submit", "--wait", "--json", str(folder / name))
    results = json.loads(done.stdout)
    assert results["state"] == "completed", results
    recipes = recipes_of(results)
    assert [r["system"] for r in recipes] == TARGETS  # never spare.lab1
    shown = json.loads(as_user("job", "show", str(results["id"]), "--json").stdout)
    assert [r["role"] for r in recipes_of(shown)] == roles
    for recipe in recipes:
        assert [t["name"] for t in recipe["tasks"]] == tasks
        # no workspace: the named tasks have nothing to run, and say so
        assert {t["result"] for t in recipe["tasks"]} == {"warn"}


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.test", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def tasks_repo(root: Path, names: list[str], order: Path) -> Path:
    """A suite repository whose tasks print the configuration labq hands them and note,
    in ``order``, when they ran (the first host is slow, so nothing keeps order by luck)."""
    repo = root / "suite-repo"
    script = (
        "#!/bin/sh\n"
        'echo "fs=${fs:-} branch=${branch:-} config=${config:-}"\n'
        'if [ "$LABQ_FQDN" = "<host1>" ]; then sleep 0.3; fi\n'
        f'echo "$LABQ_TASK_NAME" >> "{order}"\n'
    )
    for name in names:
        run = repo / "tasks" / name / "run"
        run.parent.mkdir(parents=True)
        run.write_text(script)
        run.chmod(0o755)
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", ".", cwd=repo)
    git("commit", "-q", "-m", "tasks", cwd=repo)
    return repo


@pytest.mark.usefixtures("targets")
def test_tasks_receive_the_config_merged_with_overrides(as_user, folder, tmp_path):
    names = ["install", "ceph", "rgw", "interactive"]
    order = tmp_path / "order.txt"
    repo = tasks_repo(tmp_path, names, order)
    job = tmp_path / "3node-rgw-with-suite.yaml"
    original = (folder / "teuthology-example-3node-rgw.yaml").read_text()
    job.write_text(f"{original}\nsuite_repo: {repo.as_uri()}\n")
    done = as_user("job", "submit", "--wait", "--json", str(job))
    results = json.loads(done.stdout)
    assert (results["state"], results["result"]) == ("completed", "pass"), results
    job_id = results["id"]
    listing = json.loads(as_user("job", "logs", str(job_id), "--json").stdout)
    paths = [path for recipe in listing["logs"] for path in recipe["files"]]
    ceph_logs = [p for p in paths if "ceph" in p]
    rgw_logs = [p for p in paths if "rgw" in p]
    assert len(ceph_logs) == len(rgw_logs) == 3, paths
    for path in ceph_logs:  # `ceph: null` in tasks, {branch: main, fs: xfs} in overrides
        assert "fs=xfs branch=main config=\n" in as_user("job", "logs", str(job_id), path).stdout
    for path in rgw_logs:
        assert 'config=["client.0"]' in as_user("job", "logs", str(job_id), path).stdout
    # one ordered plan: each task has run on all three machines before the next starts
    assert order.read_text().split() == [name for name in names for _ in TARGETS]


def test_an_unknown_target_is_refused_by_name(as_user, labq, live_server, folder):
    as_user("lab", "add", "lab1")
    as_user("system", "add", "<host1>", "--lab", "lab1")
    env = {"LABQ_URL": live_server.url, "LABQ_TOKEN": live_server.token}
    path = folder / "teuthology-example-3node-ceph.yaml"
    refused = labq("job", "submit", str(path), env=env, timeout=60)
    assert refused.returncode != 0
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.startswith("labq: ")
    assert "'<host2>', which is not a system labq knows" in refused.stderr
    assert json.loads(as_user("job", "list", "--json").stdout)["jobs"] == []


# fragments teuthology-suite merges into jobs: the other files are all submitted below
FRAGMENTS = {
    "ceph-teuthology-no-ceph-distros-vps.yaml",
    "teuthology-containerized-node-overrides.yaml",
}


def test_every_whole_job_is_submitted(labq, live_server, folder):
    env = {"LABQ_URL": live_server.url, "LABQ_TOKEN": live_server.token}
    # the lab's systems over the API (the submissions below are the point: each a labq command)
    systems = [{"fqdn": f, "lab": "lab1"} for f in TARGETS]
    for kind in ("smithi", "openstack", "vps"):
        systems += [
            {"fqdn": f"{kind}{i}.lab1", "lab": "lab1", "attributes": {"machine_type": kind}}
            for i in range(8)
        ]
    auth = {"Authorization": f"Bearer {live_server.token}"}
    with httpx.Client(base_url=f"{live_server.url}/api/v1", headers=auth) as admin:
        assert admin.post("/labs", json={"name": "lab1"}).status_code == 201
        for system in systems:
            added = admin.post("/systems", json=system)
            assert added.status_code == 201, added.text
    names = sorted(p.name for p in folder.glob("*.yaml") if p.name not in FRAGMENTS)
    stored, offline = [], []
    for name in names:
        done = labq("job", "submit", "--json", str(folder / name), env=env, timeout=120)
        if done.returncode == 0:
            stored.append(json.loads(done.stdout)["id"])
        else:  # a job that pins its suite branch on a remote repository needs the network
            assert "cannot pin" in done.stderr, (name, done.stderr)
            offline.append(name)
    assert len(stored) + len(offline) == 29
    assert len(stored) >= 20, offline
