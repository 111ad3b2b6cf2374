"""Reading a tree's .treeinfo: productmd 1.x and the older format, and hostile input."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from labq.domain.distro import DistroRequirement
from labq.errors import InputError
from labq.formats.treeinfo import MAX_BYTES, read_treeinfo

DATA = Path(__file__).parents[1] / "data" / "treeinfo"
NOW = datetime(2026, 11, 27, tzinfo=UTC)
BASE = "http://trees.example/rhel-9.3/BaseOS/aarch64/os/"


def read(text: str | bytes, base: str = BASE, **kw: object):
    data = text.encode() if isinstance(text, str) else text
    return read_treeinfo(data, source="t/.treeinfo", base=base, lab="lab1", now=NOW, **kw)


def test_a_productmd_tree_with_the_compatibility_section() -> None:
    tree = read((DATA / "rhel9-aarch64.treeinfo").read_bytes())
    assert (tree.name, tree.arch, tree.family) == (
        "RHEL-9.3.0",
        "aarch64",
        "RedHatEnterpriseLinux9",
    )
    assert (tree.version, tree.variant, tree.kind) == ("9.3.0", "BaseOS", "tree")
    assert tree.kernel == BASE + "images/pxeboot/vmlinuz"
    assert tree.initrd == BASE + "images/pxeboot/initrd.img"
    assert tree.repos == (
        ("BaseOS", BASE),
        ("AppStream", "http://trees.example/rhel-9.3/AppStream/aarch64/os"),
    )
    assert (tree.os_type, tree.os_version) == ("rhel", "9.3")
    assert tree.added_at == NOW
    beaker = DistroRequirement.of(
        {"and": [{"family": "RedHatEnterpriseLinux9"}, {"variant": "BaseOS"}, {"arch": "aarch64"}]}
    )
    assert beaker.admits(tree)
    assert DistroRequirement.of({"os_type": "rhel", "os_version": "9.3"}).admits(tree)
    assert DistroRequirement.of({"method": "http", "name": {"like": "RHEL-9%"}}).admits(tree)


def test_centos_stream_is_teuthologys_centos_9_stream() -> None:
    tree = read((DATA / "stream9-x86_64.treeinfo").read_bytes(), base="/srv/trees/stream9")
    assert (tree.family, tree.name) == ("CentOSStream9", "CentOS-Stream-9")
    assert (tree.os_type, tree.os_version) == ("centos", "9.stream")
    assert tree.kernel == "/srv/trees/stream9/images/pxeboot/vmlinuz"
    assert tree.repos[1] == ("AppStream", "/srv/AppStream/x86_64/os")


def test_the_old_format_and_a_given_name_and_tags() -> None:
    tree = read((DATA / "centos5-old.treeinfo").read_bytes(), name="CentOS-5.8", tags={"STABLE"})
    assert (tree.name, tree.family, tree.version, tree.arch) == (
        "CentOS-5.8",
        "CentOS5",
        "5.8",
        "i386",
    )
    assert tree.variant == ""
    assert tree.repos == (("tree", BASE),)
    assert tree.tags == {"STABLE"}
    assert (tree.os_type, tree.os_version) == ("centos", "5.8")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("family = x\n", "t/.treeinfo:1: not a .treeinfo: no [section] before the first key"),
        ("[general]\nfamily = A\nfamily = B\n", "t/.treeinfo:3: option 'family' in section"),
        ("[general]\n[general]\n", "t/.treeinfo:2: section 'general' already exists"),
        ("[general]\njust words\n", "t/.treeinfo:2: not 'key = value': just words"),
        ("[general]\nfamily = Fedora\narch = x86_64\n", "t/.treeinfo: [general] version: missing"),
        (
            "[general]\nfamily = Fedora\nversion = 39\narch = x86_64\n",
            "t/.treeinfo: [images-x86_64] kernel: missing (no [images-x86_64] section)",
        ),
        (
            "[release]\nname = Fedora\nversion = 39\n[tree]\nvariants = X\n",
            "t/.treeinfo: [tree] arch: missing",
        ),
        (
            "[release]\nname = F\nversion = 1\n[tree]\narch = x86_64\nvariants = Server\n",
            "t/.treeinfo: [variant-Server] repository: missing (no [variant-Server] section)",
        ),
        (
            "[general]\nfamily = F\nversion = 1\narch = ../x\n",
            "[general] arch: '../x' is not an arch",
        ),
        (b"[general]\nfamily = \xff\n", "t/.treeinfo: not UTF-8 text (byte 19)"),
        ("[general]\nfamily = " + "x" * 5000 + "\n", "[general] family: longer than 4096"),
    ],
)
def test_hostile_input_is_one_line_naming_file_and_place(text: str | bytes, words: str) -> None:
    with pytest.raises(InputError) as caught:
        read(text)
    message = str(caught.value)
    assert words in message
    assert "\n" not in message


def test_a_huge_file_is_refused_before_it_is_read() -> None:
    with pytest.raises(InputError, match=r"too large: \d+ bytes"):
        read(b"[general]\n" + b"; comment\n" * (MAX_BYTES // 10 + 1))


def test_a_bad_tree_name_is_refused() -> None:
    with pytest.raises(InputError, match=r"t/\.treeinfo: name: 'a b' is not a tree name"):
        read((DATA / "centos5-old.treeinfo").read_bytes(), name="a b")
