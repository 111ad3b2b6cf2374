"""Each lab's distro catalogue: stored whole, listed by lab, replaced only when asked,
removed per arch or for every arch, and gone with its lab."""

from __future__ import annotations

import pytest

from labq.domain.distro import DistroRequirement, DistroTree, choose_tree
from labq.errors import ConflictError, NotFoundError
from labq.store import Repository

from .conftest import ADMIN, at

RHEL = DistroTree(
    lab="lab1",
    name="RHEL-9.3.0-20231010.0",
    arch="aarch64",
    family="RedHatEnterpriseLinux9",
    version="9.3",
    variant="BaseOS",
    url="http://trees.example/rhel9/aarch64/",
    kernel="http://trees.example/rhel9/aarch64/images/pxeboot/vmlinuz",
    initrd="http://trees.example/rhel9/aarch64/images/pxeboot/initrd.img",
    repos=(("BaseOS", "http://trees.example/rhel9/aarch64/"), ("AppStream", "http://x/as")),
    tags=frozenset({"RELEASED", "STABLE"}),
    os_type="rhel",
    os_version="9.3",
    added_at=at(5),
)
IMAGE = DistroTree(
    lab="lab1",
    name="centos-9.stream",
    arch="x86_64",
    family="CentOSStream9",
    version="9",
    kind="image",
    machine_types=frozenset({"smithi", "mira"}),
    os_type="centos",
    os_version="9.stream",
    added_at=at(6),
)


def test_a_tree_round_trips_whole(seeded: Repository) -> None:
    seeded.distros.add(RHEL, actor=ADMIN)
    seeded.distros.add(IMAGE, actor=ADMIN)
    (rhel, image) = seeded.distros.trees("lab1")  # by name: capitals first
    assert rhel == RHEL
    assert rhel.added_at == RHEL.added_at
    assert image == IMAGE
    assert seeded.distros.trees() == [rhel, image]
    assert seeded.distros.trees("lab2") == []
    assert seeded.distros.labs_with_trees() == ["lab1"]
    wanted = DistroRequirement.of({"family": "RedHatEnterpriseLinux9", "tag": "RELEASED"})
    assert choose_tree(seeded.distros.trees("lab1"), wanted, "aarch64") == RHEL


def test_the_same_tree_twice_is_a_conflict_unless_replaced(seeded: Repository) -> None:
    seeded.distros.add(RHEL, actor=ADMIN)
    with pytest.raises(ConflictError, match="already has a tree"):
        seeded.distros.add(RHEL, actor=ADMIN)
    newer = DistroTree(**{**vars(RHEL), "variant": "AppStream", "added_at": at(9)})
    seeded.distros.add(newer, actor=ADMIN, replace=True)
    assert [t.variant for t in seeded.distros.trees("lab1")] == ["AppStream"]


def test_a_tree_is_removed_per_arch_or_whole(seeded: Repository) -> None:
    seeded.distros.add(RHEL, actor=ADMIN)
    x86 = DistroTree(**{**vars(RHEL), "arch": "x86_64"})
    seeded.distros.add(x86, actor=ADMIN)
    gone = seeded.distros.remove("lab1", RHEL.name, "x86_64", now=at(10), actor=ADMIN)
    assert [t.arch for t in gone] == ["x86_64"]
    seeded.distros.add(x86, actor=ADMIN)
    gone = seeded.distros.remove("lab1", RHEL.name, now=at(11), actor=ADMIN)
    assert sorted(t.arch for t in gone) == ["aarch64", "x86_64"]
    assert seeded.distros.trees() == []
    with pytest.raises(NotFoundError, match="has no tree"):
        seeded.distros.remove("lab1", RHEL.name, now=at(12), actor=ADMIN)


def test_a_tree_of_an_unknown_lab_is_refused_and_nothing_is_stored(seeded: Repository) -> None:
    with pytest.raises(NotFoundError, match="no lab named 'nowhere'"):
        seeded.distros.add(DistroTree(**{**vars(RHEL), "lab": "nowhere"}), actor=ADMIN)
    assert seeded.distros.trees() == []
