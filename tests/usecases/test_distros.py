"""Submitting a job whose distro requirement no lab carries: refused in one line naming the
requirement and what the labs carry (the caller's transaction then stores nothing);
accepted while no lab has a tree."""

from __future__ import annotations

import pytest

from labq.domain.distro import DistroTree
from labq.domain.job import JobSpec
from labq.errors import InputError
from labq.store import Repository
from labq.store.selection import JobQuery
from labq.usecases.submission import submit_job
from tests.contract.conftest import at

from .conftest import user


def wanting(distro: dict[str, str]) -> JobSpec:
    recipe = {"tasks": [{"name": "t", "run": "true"}], "metadata": {"distro_requires": distro}}
    return JobSpec.model_validate({"recipe_sets": [{"recipes": [recipe]}]})


def tree(name: str, family: str, arch: str = "x86_64") -> DistroTree:
    return DistroTree(lab="lab1", name=name, arch=arch, family=family, added_at=at(0))


def test_a_requirement_no_lab_carries_is_refused_naming_what_exists(seeded: Repository) -> None:
    repo = seeded
    repo.distros.add(tree("RHEL-9.4", "RedHatEnterpriseLinux9"))
    repo.distros.add(tree("Fedora-40", "Fedora40"))
    spec = wanting({"family": "RedHatEnterpriseLinux9", "arch": "aarch64"})
    with pytest.raises(InputError) as refused:
        submit_job(repo, user(repo, "alice"), spec, "native", now=at(1))
    assert str(refused.value) == (
        "recipe_sets[0].recipes[0].metadata.distro_requires: can never run: distro"
        " family=RedHatEnterpriseLinux9 arch=aarch64: no lab carries it"
        " (lab1 has Fedora40 x86_64, RedHatEnterpriseLinux9 x86_64)"
    )
    # one the lab carries is accepted
    submit_job(repo, user(repo, "alice"), wanting({"family": "Fedora40"}), "native", now=at(1))


def test_without_any_tree_a_distro_requirement_is_not_checked(seeded: Repository) -> None:
    repo = seeded
    spec = wanting({"family": "RedHatEnterpriseLinux9", "arch": "aarch64"})
    submit_job(repo, user(repo, "alice"), spec, "native", now=at(1))
    assert repo.jobs.count_found(JobQuery()) == 1
