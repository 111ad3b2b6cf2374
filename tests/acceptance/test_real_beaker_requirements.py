"""Real Beaker job files (../shared/real-jobs/beaker) on requirements, inventories and the rest.

Each file's verdict (accepted, or refused in one ``labq: FILE:LINE: …`` line, and
why) is decided from Beaker's schema and its own tests; files about <fetch> and
<guestrecipe> are judged elsewhere. A disk job and a device job then run end to
end on the local backend, on the one system whose inventory suits them.
"""

from __future__ import annotations

import json

import pytest

from tests.acceptance.test_cli_api import as_user, data  # noqa: F401 - the fixture
from tests.realjobs import REAL_JOBS, require

BEAKER = REAL_JOBS / "beaker"


@pytest.fixture(autouse=True)
def _files_are_there() -> None:
    require(BEAKER)  # skipped where they are missing, failed under CI


ACCEPTED = [
    "beaker-beakerd-eight-sets-priorities.xml",
    "beaker-bkr-job-clone-prettyxml.xml",
    "beaker-doc-hostrequires-hypervisor.xml",
    "beaker-doc-multihost-RecipeSet.xml",
    "beaker-doc-task-params.xml",
    "beaker-kickstart-cdata.xml",
    "beaker-process-custom-distro.xml",
    "beaker-schema-device-cpu-flag.xml",
    "beaker-schema-last-inventoried-date.xml",
    "beaker-schema-last-inventoried-empty.xml",
    "beaker-schema-minimal.xml",
    "beaker-schema-recipe-elements-interleaved.xml",
    "beaker-schema-reservesys-device.xml",
    "beaker-schema-system-name.xml",
    "beaker-submit-notify-duplicate-cc.xml",
    "beaker-submit-partitions.xml",
    "beaker-update-status-two-sets.xml",
    "openstack-k8s-rhel8-reserve-disk.xml",
]
# accepted too, and run end to end with their fetches served locally (test_beaker_run.py)
FETCH_AND_GUESTS = [
    "beaker-complete-job.xml",
    "beaker-doc-virtualization-workflow.xml",
    "beaker-schema-guestrecipe.xml",
    "beaker-xmlrpc-external-tasks-fetch.xml",
    "bootc-beaker-job-group-kickstart.xml",
    "bootc-beaker-job-install-s390x.xml",
    "bootc-beaker-job-switch.xml",
    "restraint-doc-multihost-fetch.xml",
]
# file -> (line, words): why each is no job labq (nor Beaker) should take
REFUSED = {
    # documents Beaker writes about jobs, not jobs (ids, results, status)
    "beaker-complete-job-results.xml": (1, "<job id=...> is a document Beaker wrote"),
    "restraint-running-recipe-document.xml": (2, "<job id=...> is a document Beaker wrote"),
    # fragments of a job, shown in Beaker's docs
    "beaker-doc-contained-harness-recipe.xml": (1, "must be a <job>, not <recipe>"),
    "beaker-doc-contained-harness-recipeset.xml": (1, "must be a <job>, not <recipeSet>"),
    # broken XML: a doc placeholder inside an attribute, a whiteboard never closed
    "beaker-doc-example-task-placeholder.xml": (14, "malformed XML"),
    "beaker-submit-unterminated-whiteboard.xml": (4, "malformed XML"),
    # invalid by Beaker's own tests
    "beaker-process-memory-with-unit.xml": (10, "<memory> compares numbers, got '500MB'"),
    "beaker-process-no-recipeset.xml": (2, "<job> has no <recipeSet>"),
    "beaker-schema-force-with-children.xml": (9, "cannot have other host requirements"),
    "beaker-schema-two-autopick.xml": (6, "<recipe> may have only one <autopick>"),
    "beaker-submit-broken-element.xml": (13, "unknown element <brokenElement> in <recipe>"),
}


def validate(labq, name):
    return labq("validate", str(BEAKER / name))


def test_every_real_beaker_file_has_a_verdict():
    verdicts = {*ACCEPTED, *FETCH_AND_GUESTS, *REFUSED}
    assert {p.name for p in BEAKER.glob("*.xml")} == verdicts


@pytest.mark.parametrize("name", ACCEPTED + FETCH_AND_GUESTS)
def test_valid_whole_jobs_are_accepted(labq, name):
    result = validate(labq, name)
    assert result.returncode == 0, result.stderr
    json.loads(result.stdout)


@pytest.mark.parametrize(("name", "why"), sorted(REFUSED.items()))
def test_fragments_and_invalid_files_are_refused_in_one_line(labq, name, why):
    line, words = why
    result = validate(labq, name)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"labq: {BEAKER / name}:{line}: "), result.stderr
    assert words in result.stderr


BIG_DISK = {"disks": [{"size": 500 * 10**9, "model": "WD5003"}], "last_inventoried": "2026-11-20"}
SMALL_DISK = {"disks": [{"size": 120 * 10**9, "model": "SSD"}], "last_inventoried": "2026-11-20"}
E1000E = {
    "devices": [{"bus": "pci", "driver": "e1000e", "vendor_id": "8086", "type": "network"}],
    "cpu_flags": ["sse2", "vmx"],
}
IGB = {"devices": [{"bus": "pci", "driver": "igb", "vendor_id": "8086"}], "cpu_flags": ["sse2"]}
RHEL8_BOX = ["memory_mb=131072", "cpu_cores=8", "system_type=Machine", "HVM=1"]


def add(as_user, tmp_path, fqdn, inventory, attrs=(), arch="x86_64"):  # noqa: F811
    args = [f"--attr={a}" for a in attrs]
    as_user("system", "add", fqdn, "--lab", "lab1", "--arch", arch, *args)
    if inventory is not None:
        path = tmp_path / f"{fqdn}.json"
        path.write_text(json.dumps(inventory))
        as_user("system", "set", fqdn, "--inventory", str(path))


def ran_on(as_user, job_id):  # noqa: F811
    shown = data(as_user("job", "show", str(job_id), "--json"))
    return {r["system"] for s in shown["sets"] for r in s["recipes"]}


def submit_and_wait(as_user, name):  # noqa: F811
    # Beaker's stock tasks (/distribution/...) are not in a local workspace: they warn
    result = as_user("job", "submit", "--wait", "--json", str(BEAKER / name), ok=False)
    assert "Traceback" not in result.stderr
    assert result.returncode in (0, 1), result.stderr
    job = json.loads(result.stdout)
    assert job["state"] == "completed", job
    return job


def test_device_and_disk_jobs_run_on_the_system_that_suits_them(as_user, tmp_path):  # noqa: F811
    as_user("lab", "add", "lab1")
    add(as_user, tmp_path, "small.lab1", SMALL_DISK, RHEL8_BOX)
    add(as_user, tmp_path, "big.lab1", BIG_DISK, RHEL8_BOX)
    (tmp_path / "broken.json").write_text('{"disks": [{"size": 1,}]}')
    (tmp_path / "wrong.json").write_text('{"disks": [{"size": "1TB"}]}')
    for bad, words in [("broken.json", "not JSON"), ("wrong.json", "inventory.disks.0.size")]:
        refused = as_user("system", "set", "big.lab1", "--inventory", str(tmp_path / bad), ok=False)
        assert refused.returncode != 0
        assert refused.stderr.count("\n") == 1, refused.stderr
        assert refused.stderr.startswith("labq: ")
        assert words in refused.stderr
    shown = as_user("system", "show", "big.lab1").stdout
    assert "last_inventoried: 2026-11-20T00:00:00Z" in shown
    assert "disks: 1" in shown
    assert "size=500000000000" in shown
    disk_job = submit_and_wait(as_user, "openstack-k8s-rhel8-reserve-disk.xml")
    assert ran_on(as_user, disk_job["id"]) == {"big.lab1"}

    add(as_user, tmp_path, "igb.lab1", IGB, ["memory_mb=2048", "cpu_cores=4"])
    add(as_user, tmp_path, "nic.lab1", E1000E, ["memory_mb=2048", "cpu_cores=4"])
    device_job = submit_and_wait(as_user, "beaker-schema-device-cpu-flag.xml")
    assert ran_on(as_user, device_job["id"]) == {"nic.lab1"}


def test_every_accepted_file_is_submitted(as_user, tmp_path):  # noqa: F811
    # systems that some recipe of each accepted file can run on (else submission refuses it)
    as_user("lab", "add", "lab1")
    as_user("group", "add", "product-QA")
    as_user("group", "add-member", "product-QA", "admin")
    never = ["system_type=Machine", "memory_mb=4096", "cpu_cores=4"]
    add(as_user, tmp_path, "bare.lab1", None, never)
    add(as_user, tmp_path, "bare2.lab1", None, never)
    add(as_user, tmp_path, "big.lab1", BIG_DISK, RHEL8_BOX)
    nic = {**E1000E, "last_inventoried": "2013-10-10T10:00:00"}
    add(as_user, tmp_path, "nic.lab1", nic, ["memory_mb=2048", "cpu_cores=4"])
    add(as_user, tmp_path, "old.lab1", None, never, arch="i386")
    add(as_user, tmp_path, "test1.system.fqdn", None, never)
    # beakerd's test fills %(labcontroller)s and %(arch)s in; taken literally, they are names
    template = BEAKER / "beaker-beakerd-eight-sets-priorities.xml"
    refused = as_user("job", "submit", str(template), ok=False)
    # the first set's <hostRequires>, its line, and the requirement no system meets
    assert f"{template}:21: /job/recipeSet[1]/" in refused.stderr
    assert (
        "/hostRequires: can never run: lab = %(labcontroller)s: no system has it (they have lab1)"
        in refused.stderr
    )
    as_user("lab", "add", "%(labcontroller)s")
    as_user("system", "add", "t.lab2", "--lab", "%(labcontroller)s", "--arch", "%(arch)s")
    add(as_user, tmp_path, "z.lab1", None, never, arch="s390x")
    for group in ("somegroup", "rhel-edge"):  # the groups the fetch and guest files run for
        as_user("group", "add", group)
        as_user("group", "add-member", group, "admin")
    # the fetched tasks are fetched when the sets run: submission stores them as they are
    for name in ACCEPTED + FETCH_AND_GUESTS:
        result = as_user("job", "submit", "--json", str(BEAKER / name), ok=False)
        assert result.returncode == 0, (name, result.stderr)
