"""Beaker jobs from the field run end to end: fetched tasks and a guest recipe.

The job files are read from ``../shared/real-jobs/beaker`` as they are and
submitted with ``labq job submit``. Their fetch URLs point at hosts the test
cannot reach, so the server's settings rewrite them (``fetch.rewrite``, as a
lab would point them at a mirror) to git repositories and a tarball built here
and read over ``file://``. The lab's guest hooks stand in for virt-install.
"""

from __future__ import annotations

import io
import json
import tarfile
import textwrap
from pathlib import Path

import httpx
import pytest

from tests.acceptance.conftest import cli, running_server, wait_for
from tests.dispatch.conftest import git
from tests.realjobs import REAL_JOBS, require

REAL = REAL_JOBS / "beaker"


@pytest.fixture(autouse=True)
def _files_are_there() -> None:
    require(REAL)  # skipped where they are missing, failed under CI


# prints what the task sees, so the test can check params, roles and the place it ran in
REPORT = """\
#!/bin/sh
echo "task=$LABQ_TASK_NAME test=$TEST fqdn=$LABQ_FQDN servers=$SERVERS clients=$CLIENTS \
image=$BOOTC_IMAGE_URL dir=$(basename "$PWD")" >> "$LABQ_LOG_DIR/report.txt"
"""
METADATA = """\
[General]
name={name}
[restraint]
entry_point=./runtest.sh
max_time=2m
"""


def write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    path.chmod(mode)


def repo(path: Path, branch: str, tasks: dict[str, str]) -> None:
    """A git repository on ``branch`` with a restraint task in each directory of ``tasks``."""
    for sub, name in tasks.items():
        write(path / sub / "runtest.sh", REPORT, 0o755)
        write(path / sub / "metadata", METADATA.format(name=name))
    git("init", "-q", "-b", branch, cwd=path)
    git("add", *(tasks or ["."]), cwd=path)
    git("commit", "-q", "-m", "tasks", cwd=path)


def sources(root: Path) -> dict[str, str]:
    """Build the repositories and tarball the jobs name; the rewrites that reach them."""
    # beaker-xmlrpc-external-tasks-fetch.xml: repo#master, and repo#master with subdir=
    repo(root / "externaltasks/example", "master", {".": "/example"})
    repo(root / "externaltasks/example2", "master", {".": "/example2"})
    repo(root / "externaltasks", "master", {"examples/3": "/ex3", "examples/4": "/ex4"})
    # restraint-doc-multihost-fetch.xml: tests.git?master#kernel/filesystems/nfs/…
    repo(
        root / "bpeck/tests.git",
        "master",
        {"kernel/filesystems/nfs/connectathon-mh": "/kernel/filesystems/nfs/connectathon-mh"},
    )
    # bootc-beaker-job-switch.xml: a GitHub tag tarball, #subdirectory
    archive = root / "archives/v0.0.13.tar.gz"
    archive.parent.mkdir(parents=True)
    with tarfile.open(archive, "w:gz") as tar:
        for sub in ("check-system", "switch"):
            data = REPORT.encode()
            info = tarfile.TarInfo(f"beaker-job-0.0.13/{sub}/runtest.sh")
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return {
        "git://example.com/": f"file://{root}/",
        "git://fedorapeople.org/home/fedora/bpeck/public_git/": f"file://{root}/bpeck/",
        "https://github.com/henrywang/beaker-job/archive/refs/tags/": f"file://{root}/archives/",
    }


@pytest.fixture
def beaker_lab(tmp_path):
    config = tmp_path / "labq.yaml"
    hooks = {
        "guest_create": "/bin/sh -c 'echo \"$0 $*\" > guest.txt' {guestname} on {hostfqdn} "
        "{guestargs}",
        "guest_destroy": "/bin/sh -c 'echo destroyed > guest-destroyed.txt'",
    }
    settings = {"fetch": {"rewrite": sources(tmp_path / "src")}, "labs": {"lab1": {"hooks": hooks}}}
    config.write_text(json.dumps(settings))
    data = tmp_path / "data"
    with running_server(
        f"sqlite:///{tmp_path / 'labq.db'}",
        data=data,
        home=tmp_path,
        log=tmp_path / "server.log",
        config=config,
    ) as running:
        env = {**running.env, "LABQ_URL": running.url, "LABQ_TOKEN": running.token}
        assert cli(env, "lab", "add", "lab1").returncode == 0
        for fqdn in ("a.lab1", "b.lab1"):
            added = cli(
                env,
                *("system", "add", fqdn, "--lab", "lab1"),
                *("--attr", "system_type=Machine", "--attr", "HVM=1"),
            )
            assert added.returncode == 0, added.stderr
        yield env, data


def submit(env: dict[str, str], name: str) -> int:
    done = cli(env, "job", "submit", str(REAL / name), "--json")
    assert done.returncode == 0, done.stderr
    return int(json.loads(done.stdout)["id"])


def results(env: dict[str, str], job_id: int) -> dict:
    with httpx.Client(
        base_url=f"{env['LABQ_URL']}/api/v1",
        headers={"Authorization": f"Bearer {env['LABQ_TOKEN']}"},
        timeout=10,
    ) as client:
        return wait_for(client, job_id, timeout=90)


def reports(data: Path, set_id: int, fqdn: str, *guest: str) -> list[str]:
    where = data / "logs" / f"set-{set_id}" / fqdn
    if guest:
        where = where / "guests" / guest[0]
    return (where / "collected" / "report.txt").read_text().splitlines()


def test_beaker_jobs_with_fetched_tasks_and_a_guest_recipe_run_end_to_end(beaker_lab):
    env, data = beaker_lab
    ids = {
        name: submit(env, name)
        for name in (
            "beaker-xmlrpc-external-tasks-fetch.xml",
            "restraint-doc-multihost-fetch.xml",
            "bootc-beaker-job-switch.xml",
            "beaker-doc-virtualization-workflow.xml",
        )
    }

    # external tasks: repo#branch and repo#branch with a subdir, named and nameless
    external = results(env, ids["beaker-xmlrpc-external-tasks-fetch.xml"])
    assert external["state"] == "completed"
    (recipe,) = external["sets"][0]["recipes"]
    tasks = recipe["tasks"]
    assert [t["name"] for t in tasks] == [
        "/distribution/check-install",
        "/distribution/example",
        "/example.com/externaltasks/example2",
        "/distribution/example3",
        "/example.com/externaltasks/examples/4",
    ]
    assert [t["result"] for t in tasks] == ["warn", "pass", "pass", "pass", "pass"]
    seen = reports(data, external["sets"][0]["id"], recipe["system"])
    # TEST is the name the task's metadata gives, as restraint does
    assert [line.split()[1] for line in seen] == [
        "test=/example",
        "test=/example2",
        "test=/ex3",
        "test=/ex4",
    ]

    # multihost: both recipes fetch the same task; each sees the other's role
    multihost = results(env, ids["restraint-doc-multihost-fetch.xml"])
    assert multihost["state"] == "completed"
    assert multihost["result"] == "pass"
    server, client = multihost["sets"][0]["recipes"]
    for recipe in (server, client):
        (line,) = reports(data, multihost["sets"][0]["id"], recipe["system"])
        assert f"servers={server['system']} clients={client['system']}" in line

    # a tarball from a tag, #subdirectory, with a parameter in the environment
    switch = results(env, ids["bootc-beaker-job-switch.xml"])
    assert switch["state"] == "completed"
    assert switch["result"] == "pass"
    (recipe,) = switch["sets"][0]["recipes"]
    first, second = reports(data, switch["sets"][0]["id"], recipe["system"])
    assert "task=check-system" in first
    assert "image=quay.io/xiaofwan/fedora-bootc-os_replace:beaker" in first
    assert "task=switch" in second

    # the guest recipes: made by the lab's hook, tasks under their host, then destroyed
    virt = results(env, ids["beaker-doc-virtualization-workflow.xml"])
    assert virt["state"] == "completed"
    (host,) = virt["sets"][0]["recipes"]
    assert [(t["name"], t["guest"]) for t in host["tasks"]] == [
        ("/distribution/check-install", None),
        ("/distribution/virt/install", None),
        ("/distribution/virt/start", None),
        ("/distribution/reservesys", None),
        ("/distribution/check-install", "guest1"),
        ("/distribution/check-install", "guest2"),
    ]
    assert all(t["status"] == "completed" for t in host["tasks"])
    logs = data / "logs" / f"set-{virt['sets'][0]['id']}" / host["system"]
    made = (logs / "guests/guest1/guest.txt").read_text()
    assert made == f"guest1 on {host['system']} --ram=1024 --vcpus=2 --file-size=20 --kvm\n"
    assert (logs / "guests/guest2/guest-destroyed.txt").read_text() == "destroyed\n"
    shown = cli(env, "job", "results", str(ids["beaker-doc-virtualization-workflow.xml"]))
    assert "guest guest1" in shown.stdout
    # every fetch went through the cache: one checkout per repository and commit
    assert len(list((data / "fetched" / "git").iterdir())) == 4
