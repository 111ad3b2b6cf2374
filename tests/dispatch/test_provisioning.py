"""A Beaker custom distro reaches the lab's reimage hook, from the job file to the hook's env."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from datetime import UTC, datetime

from labq.dispatch.backends.local import LocalBackend
from labq.dispatch.hooks import HookedBackend, HookSet
from labq.dispatch.provisioning import provision_environment
from labq.dispatch.runner import run_set
from labq.dispatch.setplans import load_plan
from labq.domain.distro import DistroTree
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


REQUIRES = """<job><recipeSet><recipe ks_meta="method=nfs harness=restraint"
  kernel_options="console=ttyS0" kernel_options_post="quiet">
<distroRequires><and>
  <distro_family op="=" value="RedHatEnterpriseLinux9"/>
  <distro_variant op="=" value="BaseOS"/>
  <distro_arch op="=" value="x86_64"/>
</and></distroRequires>
<hostRequires/>
<ks_appends><ks_append><![CDATA[%post
echo hi
%end]]></ks_append></ks_appends>
<task name="/distribution/check-install"/>
</recipe></recipeSet></job>"""


def _tree(name: str, minute: int, **kw: object) -> DistroTree:
    base = f"http://trees.lab/{name}/"
    facts: dict[str, object] = {
        "family": "RedHatEnterpriseLinux9",
        "version": name.removeprefix("RHEL-"),
        "variant": "BaseOS",
        "url": base,
        "kernel": base + "images/pxeboot/vmlinuz",
        "initrd": base + "images/pxeboot/initrd.img",
        "repos": (("BaseOS", base), ("AppStream", base + "../AppStream/")),
        "os_type": "rhel",
        "os_version": name.removeprefix("RHEL-"),
    }
    facts.update(kw)
    return DistroTree(
        lab=LAB,
        name=name,
        arch="x86_64",
        added_at=datetime(2026, 1, 1, 0, minute, tzinfo=UTC),
        **facts,  # type: ignore[arg-type]
    )


def test_the_reimage_hook_gets_the_newest_matching_tree_of_the_lab(lab: Lab, tmp_path) -> None:  # noqa: F811
    now = datetime.now(UTC)
    spec = parse_beaker(REQUIRES, source="j.xml")
    with lab.repo() as repo:
        for tree in (
            _tree("RHEL-9.2", 1),
            _tree("RHEL-9.3", 2),
            _tree("RHEL-9.4", 3, variant="AppStream"),  # newer, but not the variant asked for
            _tree("F40", 4, family="Fedora40", variant="Everything"),
        ):
            repo.distros.add(tree)
        job_id = repo.queue.submit_job(spec, owner="alice", now=now, source_format="beaker")
        view = repo.jobs.load_job(job_id).sets[0]
        repo.moves.move_recipe(view.recipes[0].id, RecipeState.SCHEDULED, now=now, system="s1.test")
        repo.supervisors.start_recipe_set(view.id, lab=LAB, now=now)
    with lab.read() as repo:
        plan = load_plan(repo, view.id)
    seen = tmp_path / "hook-env.json"
    script = tmp_path / "reimage.py"
    script.write_text(
        "import json, os, sys\n"
        "env = {k: v for k, v in os.environ.items() if k.startswith('LABQ_')}\n"
        "open(sys.argv[1], 'w').write(json.dumps(env))\n"
    )
    hook = f"{sys.executable} {script} {seen}"
    backend = HookedBackend(LocalBackend(lab.data_dir), HookSet(reimage=hook))
    run_set(
        plan,
        defaultdict(lambda: backend),
        data_dir=lab.data_dir,
        reporter=RecordingReporter(),
        heartbeat_every=0.2,
    )
    env = json.loads(seen.read_text())
    assert env["LABQ_HOOK"] == "reimage"
    assert env["LABQ_DISTRO_NAME"] == "RHEL-9.3"
    assert env["LABQ_DISTRO_FAMILY"] == "RedHatEnterpriseLinux9"
    assert env["LABQ_DISTRO_VERSION"] == "9.3"
    assert env["LABQ_DISTRO_VARIANT"] == "BaseOS"
    assert env["LABQ_DISTRO_ARCH"] == "x86_64"
    assert env["LABQ_DISTRO_KERNEL"] == "http://trees.lab/RHEL-9.3/images/pxeboot/vmlinuz"
    assert env["LABQ_DISTRO_INITRD"] == "http://trees.lab/RHEL-9.3/images/pxeboot/initrd.img"
    assert env["LABQ_DISTRO_REPOS"].splitlines() == [
        "BaseOS=http://trees.lab/RHEL-9.3/",
        "AppStream=http://trees.lab/RHEL-9.3/../AppStream/",
    ]
    assert env["LABQ_KS_META"] == "method=nfs harness=restraint"
    assert env["LABQ_KERNEL_OPTIONS"] == "console=ttyS0"
    assert env["LABQ_KERNEL_OPTIONS_POST"] == "quiet"
    assert env["LABQ_KS_APPENDS"] == "%post\necho hi\n%end\n"
    assert "RedHatEnterpriseLinux9" in env["LABQ_PROVISION"]
    assert not any("TOKEN" in k or "PASSWORD" in k for k in env)


def test_no_tree_of_the_arch_means_no_distro_variables() -> None:
    metadata = parse_beaker(REQUIRES, source="j.xml").recipe_sets[0].recipes[0].metadata
    env = provision_environment(metadata, None)
    assert not any(k.startswith("LABQ_DISTRO_") for k in env)
    assert env["LABQ_KS_META"] == "method=nfs harness=restraint"
