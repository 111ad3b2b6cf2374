"""Initramfs archives as GNU cpio reads them back (the kernel's newc format)."""

import io
import shutil
import stat
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labq.dispatch.vms.cpio import Entry, write

pytestmark = pytest.mark.skipif(shutil.which("cpio") is None, reason="cpio is not installed")


def _unpack(archive, dest):
    dest.mkdir()
    subprocess.run(
        ["cpio", "-idm", "--quiet", "--no-absolute-filenames"],
        input=archive,
        cwd=dest,
        check=True,
        capture_output=True,
    )


def test_files_directories_and_symlinks_come_back(tmp_path):
    out = io.BytesIO()
    write(
        out,
        [
            Entry.directory("etc"),
            Entry.file("etc/key", b"secret\n", 0o600),
            Entry.file("run", b"#!/bin/sh\n", 0o755),
            Entry.symlink("init", "run"),
        ],
    )
    _unpack(out.getvalue(), tmp_path / "x")
    assert (tmp_path / "x/etc/key").read_bytes() == b"secret\n"
    assert stat.S_IMODE((tmp_path / "x/etc/key").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "x/run").stat().st_mode) == 0o755
    assert (tmp_path / "x/init").readlink().as_posix() == "run"


@settings(max_examples=20, deadline=None)
@given(st.dictionaries(st.from_regex(r"[a-z]{1,8}", fullmatch=True), st.binary(max_size=300)))
def test_any_contents_round_trip(tmp_path_factory, files):
    out = io.BytesIO()
    write(out, [Entry.file(name, data) for name, data in files.items()])
    assert len(out.getvalue()) % 4 == 0  # so another archive may follow it
    dest = tmp_path_factory.mktemp("cpio")
    _unpack(out.getvalue(), dest / "x")
    assert {p.name: p.read_bytes() for p in (dest / "x").iterdir()} == files
