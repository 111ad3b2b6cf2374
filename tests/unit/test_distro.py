"""Distro requirements over trees: Beaker's and Teuthology's forms, the newest tree wins."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from labq.domain.distro import (
    DistroRequirement,
    DistroTree,
    choose_tree,
    custom_tree,
    family_for_os,
    os_of,
    requirement_of,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def tree(name: str, arch: str = "x86_64", minutes: int = 0, **kw: object) -> DistroTree:
    facts: dict[str, object] = {
        "family": "RedHatEnterpriseLinux9",
        "version": "9.3",
        "variant": "BaseOS",
        "os_type": "rhel",
        "os_version": "9.3",
    }
    facts.update(kw)
    return DistroTree(
        lab="lab1", name=name, arch=arch, added_at=T0 + timedelta(minutes=minutes), **facts
    )  # type: ignore[arg-type]


def test_a_beaker_requirement_picks_the_newest_tree_of_the_arch() -> None:
    old, new = tree("RHEL-9.2", minutes=1), tree("RHEL-9.3", minutes=2)
    arm = tree("RHEL-9.3", arch="aarch64", minutes=3)
    other = tree("F39", minutes=9, family="Fedora39", os_type="fedora")
    wanted = requirement_of(
        {"distro_requires": {"and": [{"family": "RedHatEnterpriseLinux9"}, {"variant": "BaseOS"}]}}
    )
    assert wanted is not None
    assert choose_tree([new, arm, other, old], wanted, "x86_64") == new
    assert choose_tree([new, arm, other, old], wanted, "aarch64") == arm
    assert choose_tree([new, other], wanted, "s390x") is None
    assert wanted.describe() == "family=RedHatEnterpriseLinux9 variant=BaseOS"


def test_a_teuthology_requirement_and_an_image_for_some_machine_types() -> None:
    image = tree(
        "c9",
        kind="image",
        machine_types=frozenset({"smithi"}),
        os_type="centos",
        os_version="9.stream",
    )
    wanted = DistroRequirement.of({"os_type": "centos", "os_version": "9.stream"})
    assert choose_tree([image], wanted, "x86_64", "smithi") == image
    assert choose_tree([image], wanted, "x86_64", "mira") is None
    assert choose_tree([image], wanted, "x86_64") is None
    assert wanted.describe() == "os_type=centos os_version=9.stream"


def test_no_distro_and_a_custom_distro_need_no_catalogue_tree() -> None:
    assert requirement_of({}) is None
    assert requirement_of(None) is None
    custom = {
        "tree": "http://t.example/f39/",
        "kernel": "images/pxeboot/vmlinuz",
        "initrd": "http://elsewhere/initrd.img",
        "arch": "x86_64",
        "osversion": {"major": "Fedora39", "minor": "1"},
    }
    assert requirement_of({"distro": custom}) is None
    own = custom_tree({"distro": custom}, lab="lab1")
    assert own is not None
    assert own.kernel == "http://t.example/f39/images/pxeboot/vmlinuz"
    assert own.initrd == "http://elsewhere/initrd.img"
    assert (own.family, own.version) == ("Fedora39", "39.1")


def test_descriptions_say_operators_and_alternatives_in_one_line() -> None:
    wanted = DistroRequirement.of(
        {"or": [{"name": {"like": "RHEL-9%"}}, {"tag": "RELEASED"}], "arch": {"!=": "s390x"}}
    )
    assert wanted.describe() == "(name like RHEL-9% or tag=RELEASED) arch != s390x"
    assert DistroRequirement.of({}).describe() == "any tree"


def test_teuthology_names_for_treeinfo_products() -> None:
    assert os_of("Red Hat Enterprise Linux", "9.3") == ("rhel", "9.3")
    assert os_of("CentOS Stream", "9") == ("centos", "9.stream")
    assert os_of("Some Product", "1") == ("", "")
    assert family_for_os("centos", "9.stream") == "CentOSStream9"
    assert family_for_os("ubuntu", "22.04") == "Ubuntu22"


names = st.sampled_from(["family", "variant", "name", "tag", "arch", "os_type"])
values = st.sampled_from(["RedHatEnterpriseLinux9", "BaseOS", "RHEL-9.3", "x86_64", "rhel", "X"])
natives = st.dictionaries(names, values, max_size=4)


@given(natives, natives)
def test_equal_requirements_have_equal_keys_and_agree(a: dict[str, str], b: dict[str, str]) -> None:
    first, second = DistroRequirement.of(a), DistroRequirement.of(dict(reversed(list(a.items()))))
    assert first == second
    assert hash(first) == hash(second)
    one = tree("RHEL-9.3", tags=frozenset({"X"}))
    assert first.admits(one) == second.admits(one)
    assert DistroRequirement.of(first.native()) == first
    if DistroRequirement.of(b).key == first.key:
        assert DistroRequirement.of(b).admits(one) == first.admits(one)
