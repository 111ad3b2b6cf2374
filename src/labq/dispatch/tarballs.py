"""Extracting a fetched tarball without letting it write outside its tree.

Python 3.11.4 added ``tarfile``'s extraction filters; ``filter="data"`` refuses
absolute paths, paths and links that leave the tree, and device files, and drops
owners and set-id bits. Debian 12's Python is 3.11.2 and has no filters, so there
the same rules are kept here, member by member, before anything is written.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path, PurePosixPath


def extract(archive: Path, tree: Path) -> None:
    """Extract ``archive`` into the directory ``tree``; :class:`tarfile.TarError` for an
    unreadable archive or a member that would leave the tree."""
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(tree, filter="data")
            return
        members = [_checked(m, tree.resolve()) for m in tar.getmembers()]
        tar.extractall(tree, members=members)  # noqa: S202 (each member checked above)


def _checked(member: tarfile.TarInfo, root: Path) -> tarfile.TarInfo:
    """The member as the data filter would let it through, or TarError naming it."""
    name = PurePosixPath(member.name)
    if name.is_absolute():
        raise tarfile.TarError(f"{member.name}: an absolute path")
    if not member.isfile() and not member.isdir() and not member.issym() and not member.islnk():
        raise tarfile.TarError(f"{member.name}: a device file or FIFO")
    _inside(root, root / name, member.name)
    if member.issym():
        if PurePosixPath(member.linkname).is_absolute():
            raise tarfile.TarError(f"{member.name}: a link to an absolute path")
        _inside(root, (root / name).parent / member.linkname, member.name)
    elif member.islnk():
        _inside(root, root / member.linkname, member.name)
    member.mode = (member.mode or 0) & 0o755 | (0o700 if member.isdir() else 0o600)
    member.uid, member.gid = os.getuid(), os.getgid()  # owned by whoever extracts
    member.uname = member.gname = ""
    return member


def _inside(root: Path, path: Path, name: str) -> None:
    resolved = Path(os.path.normpath(path))
    if resolved != root and root not in resolved.parents:
        raise tarfile.TarError(f"{name}: outside the tree")
