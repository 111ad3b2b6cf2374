"""A fetched tarball is extracted inside its tree, with Python's data filter (3.11.4 on)
and with labq's own checks where the filter is missing (Debian 12's Python 3.11.2)."""

from __future__ import annotations

import io
import stat
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from labq.dispatch import tarballs

Member = Callable[[tarfile.TarFile], None]


@pytest.fixture(params=["filter", "own checks"])
def flavour(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "own checks":  # as on a Python without extraction filters
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    elif not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python has no tarfile extraction filters")
    return str(request.param)


def _file(name: str, text: str = "x", mode: int = 0o644) -> Member:
    def add(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(text), mode
        tar.addfile(info, io.BytesIO(text.encode()))

    return add


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> Member:
    def add(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(name)
        info.type, info.linkname = kind, target
        tar.addfile(info)

    return add


def _fifo(name: str) -> Member:
    def add(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(name)
        info.type = tarfile.FIFOTYPE
        tar.addfile(info)

    return add


def _archive(path: Path, *members: Member) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for add in members:
            add(tar)
    return path


@pytest.mark.parametrize(
    "evil",
    [
        _file("../escaped.sh"),
        _link("out", "../../escaped"),
        _link("abs", "/etc/passwd"),
        _link("hard", "../escaped", tarfile.LNKTYPE),
        _fifo("pipe"),
    ],
    ids=["dot-dot", "symlink-out", "symlink-absolute", "hardlink-out", "fifo"],
)
def test_a_member_that_would_leave_the_tree_is_refused(
    flavour: str, evil: Member, tmp_path: Path
) -> None:
    archive = _archive(tmp_path / "evil.tar.gz", _file("fine.txt"), evil)
    tree = tmp_path / "a" / "tree"
    tree.mkdir(parents=True)
    with pytest.raises(tarfile.TarError):
        tarballs.extract(archive, tree)
    assert not (tmp_path / "a" / "escaped.sh").exists()
    assert not (tmp_path / "escaped.sh").exists()


def test_an_absolute_path_stays_inside_the_tree(flavour: str, tmp_path: Path) -> None:
    """The data filter makes it relative; labq's own checks refuse it."""
    outside = tmp_path / "absolute.sh"
    archive = _archive(tmp_path / "abs.tar.gz", _file(str(outside)))
    tree = tmp_path / "tree"
    tree.mkdir()
    try:
        tarballs.extract(archive, tree)
    except tarfile.TarError:
        assert flavour == "own checks"
    else:
        assert (tree / str(outside).lstrip("/")).read_text() == "x"
    assert not outside.exists()


def test_an_ordinary_tarball_is_extracted_without_set_id_bits(flavour: str, tmp_path: Path) -> None:
    archive = _archive(
        tmp_path / "good.tar.gz",
        _file("project-1.0/runtest.sh", "echo hi", 0o4755),
        _file("project-1.0/data/readme", "read me"),
        _link("project-1.0/latest", "data/readme"),
    )
    tree = tmp_path / "tree"
    tree.mkdir()
    tarballs.extract(archive, tree)
    script = tree / "project-1.0" / "runtest.sh"
    assert script.read_text() == "echo hi"
    assert script.stat().st_mode & stat.S_ISUID == 0
    assert script.stat().st_mode & 0o100  # still runnable by its owner
    assert (tree / "project-1.0" / "latest").read_text() == "read me"
