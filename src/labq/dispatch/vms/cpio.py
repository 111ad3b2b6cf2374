"""Writing initramfs archives (cpio ``newc``), the format the Linux kernel unpacks.

The kernel accepts several archives one after another as one initrd, each unpacked
over the last; the libvirt provider appends a small one to a tree's initrd to hand a
VM its keys, and the test guest's whole initramfs is written with it.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

_MAGIC: Final = b"070701"
_TRAILER: Final = "TRAILER!!!"


@dataclass(frozen=True)
class Entry:
    """One member: a directory, a regular file, a symlink or a character device."""

    path: str  # relative, no leading slash
    mode: int  # with its type bits (stat.S_IFREG | 0o755)
    data: bytes = b""  # a file's content; a symlink's target
    rdev: tuple[int, int] = (0, 0)  # a device's major and minor

    @classmethod
    def directory(cls, path: str, perm: int = 0o755) -> Entry:
        return cls(path, stat.S_IFDIR | perm)

    @classmethod
    def file(cls, path: str, data: bytes, perm: int = 0o644) -> Entry:
        return cls(path, stat.S_IFREG | perm, data)

    @classmethod
    def symlink(cls, path: str, target: str) -> Entry:
        return cls(path, stat.S_IFLNK | 0o777, target.encode())

    @classmethod
    def chardev(cls, path: str, major: int, minor: int, perm: int = 0o600) -> Entry:
        return cls(path, stat.S_IFCHR | perm, rdev=(major, minor))

    @classmethod
    def copy(cls, path: str, source: Path) -> Entry:
        """A regular file with ``source``'s content and permission bits."""
        return cls.file(path, source.read_bytes(), stat.S_IMODE(source.stat().st_mode))


def _pad(out: BinaryIO, length: int) -> None:
    out.write(b"\0" * (-length % 4))


def _header(out: BinaryIO, ino: int, entry: Entry | None) -> None:
    name = (entry.path.lstrip("/") if entry else _TRAILER).encode() + b"\0"
    mode, size, rdev = (entry.mode, len(entry.data), entry.rdev) if entry else (0, 0, (0, 0))
    nlink = 2 if stat.S_ISDIR(mode) else 1
    # ino mode uid gid nlink mtime size devmajor devminor rdevmajor rdevminor namesize check
    fields = (ino, mode, 0, 0, nlink, 0, size, 0, 0, rdev[0], rdev[1], len(name), 0)
    head = _MAGIC + b"".join(b"%08X" % f for f in fields)
    out.write(head + name)
    _pad(out, len(head) + len(name))


def write(out: BinaryIO, entries: list[Entry]) -> None:
    """Write ``entries`` (parents before children) and the trailer, owned by root."""
    for ino, entry in enumerate(entries, start=1):
        _header(out, ino, entry)
        out.write(entry.data)
        _pad(out, len(entry.data))
    _header(out, 0, None)
    _pad(out, 0)
