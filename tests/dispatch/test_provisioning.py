"""A Beaker custom distro reaches the lab's reimage hook, from the job file to the hook's env."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

from labq.dispatch import HookedBackend, HookSet, run_set
from labq.dispatch.backends.local import LocalBackend
from labq.dispatch.provisioning import provision_environment
from labq.dispatch.supervisor import load_plan
from labq.domain.states import RecipeState, Result
from labq.formats.beaker_xml import parse_beaker

from .conftest import RecordingReporter
from .test_supervisor import LAB, Lab, lab, sqlite_template  # noqa: F401 - fixtures

CUSTOM = """<job><recipeSet><recipe>
<distro>
  <tree url="http://mirror.lab/My1.0/Server/x86_64/os/"/>
  <initrd url="images/pxeboot/initrd.img"/>
  <kernel url="http://elsewhere.lab/vmlinuz"/>
  <arch value="x86_64"/>
  <osversion major="RedHatEnterpriseLinux7" minor="9"/>
</distro>
<task name="/distribution/check-install"/>
</recipe></recipeSet></job>"""


def test_the_variables_of_a_custom_distro():
    distro = parse_beaker(CUSTOM, source="j.xml").recipe_sets[0].recipes[0].metadata
    env = provision_environment(distro)
    assert {k: v for k, v in env.items() if k.startswith("LABQ_DISTRO_")} == {
        "LABQ_DISTRO_TREE": "http://mirror.lab/My1.0/Server/x86_64/os/",
        "LABQ_DISTRO_INITRD": "http://mirror.lab/My1.0/Server/x86_64/os/images/pxeboot/initrd.img",
        "LABQ_DISTRO_KERNEL": "http://elsewhere.lab/vmlinuz",  # absolute: kept
        "LABQ_DISTRO_ARCH": "x86_64",
        "LABQ_DISTRO_OSMAJOR": "RedHatEnterpriseLinux7",
        "LABQ_DISTRO_OSMINOR": "9",
    }
    assert '"osversion":{"major":"RedHatEnterpriseLinux7","minor":"9"}' in env["LABQ_PROVISION"]
    assert provision_environment({}) == {}


def test_the_reimage_hook_gets_the_custom_distro_of_a_stored_job(lab: Lab, tmp_path) -> None:  # noqa: F811
    now = datetime.now(UTC)
    spec = parse_beaker(CUSTOM, source="j.xml")
    with lab.repo() as repo:
        job_id = repo.queue.submit_job(spec, owner="alice", now=now, source_format="beaker")
        view = repo.jobs.load_job(job_id).sets[0]
        repo.moves.move_recipe(view.recipes[0].id, RecipeState.SCHEDULED, now=now, system="s1.test")
        repo.supervisors.start_recipe_set(view.id, lab=LAB, now=now)
    with lab.read() as repo:
        plan = load_plan(repo, view.id)
    seen = tmp_path / "hook-env.txt"
    hook = f"/bin/sh -c 'env | grep ^LABQ_ | sort > {seen}'"
    backend = HookedBackend(LocalBackend(lab.data_dir), HookSet(reimage=hook))
    outcome = run_set(
        plan,
        defaultdict(lambda: backend),
        data_dir=lab.data_dir,
        reporter=RecordingReporter(),
        heartbeat_every=0.2,
    )
    assert outcome.result is Result.WARN  # the named task is not in the local workspace
    lines = seen.read_text().splitlines()
    assert "LABQ_HOOK=reimage" in lines
    assert "LABQ_DISTRO_TREE=http://mirror.lab/My1.0/Server/x86_64/os/" in lines
    assert "LABQ_DISTRO_OSMAJOR=RedHatEnterpriseLinux7" in lines
