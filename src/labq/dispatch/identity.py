"""Which Unix user a set's tasks run as on the local backend (``labs.<lab>.local.run_as``).

- ``None`` (the default): the server's own user. Tasks can then read whatever the
  server can — its database file included — and each other's ``/proc``: fine for
  one person's lab, not for a shared one.
- a user name or number: every set's tasks run as that user. The server, its
  database and other installations are out of reach; sets are not kept from
  each other.
- ``dynamic``: each running set gets a user id of its own from
  ``dynamic_uids`` (like systemd's DynamicUser), held for as long as its
  supervisor lives, so no task can read another set's environment (its API
  token) or memory.

Anything but ``None`` needs a server running as root. The set's workspace is
handed to the user; the data directory itself can be traversed but not listed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

from labq.errors import LabqError

DYNAMIC: Final = "dynamic"


@dataclass(frozen=True)
class TaskUser:
    """A user tasks run as: ids, the name it goes by, and the lock that keeps it ours."""

    uid: int
    gid: int
    name: str


def parse_range(text: str) -> range:
    """``"61184-65519"`` as a range of user ids."""
    try:
        low, high = (int(part) for part in text.split("-", 1))
    except ValueError:
        raise LabqError(f"dynamic_uids {text!r} is not a range like 61184-65519") from None
    if not 0 < low <= high:
        raise LabqError(f"dynamic_uids {text!r} is not a range of positive user ids")
    return range(low, high + 1)


def fixed_user(name: str) -> TaskUser:
    """The user named (or numbered) ``name``."""
    try:
        entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except (KeyError, ValueError):
        if name.isdigit():
            return TaskUser(int(name), int(name), f"uid-{name}")
        raise LabqError(f"run_as: no user {name!r} on this host") from None
    return TaskUser(entry.pw_uid, entry.pw_gid, entry.pw_name)


class DynamicUsers:
    """Hands out user ids from a range, one per running set, by a lock file per id under
    ``<data_dir>/run/uids`` (a crashed supervisor's lock goes with it)."""

    def __init__(self, data_dir: Path, uids: range) -> None:
        self.dir = data_dir / "run" / "uids"
        self.uids = uids
        self._held: IO[str] | None = None

    def take(self, set_id: int) -> TaskUser:
        """A user id nobody else holds, tried from a place that depends on the set."""
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        start = set_id % len(self.uids)
        for step in range(len(self.uids)):
            uid = self.uids[(start + step) % len(self.uids)]
            handle = (self.dir / str(uid)).open("a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            self._held = handle
            return TaskUser(uid, uid, f"labq-{uid}")
        raise LabqError(f"every user id in {self.uids.start}-{self.uids.stop - 1} is in use")

    def give_back(self) -> None:
        """Let the next set have the id."""
        if self._held is not None:
            with contextlib.suppress(OSError):
                self._held.close()
            self._held = None


def hand_over(path: Path, user: TaskUser) -> None:
    """Make a workspace (and everything in it) the task user's, private to it."""
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.lchown(Path(root) / name, user.uid, user.gid)
    os.chown(path, user.uid, user.gid)
    path.chmod(0o700)


def traversable(*dirs: Path) -> None:
    """Let other users pass through these directories without listing them (``--x``); the
    directories above them must let them through already (else :class:`LabqError`)."""
    for directory in dirs:
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o711)
    for parent in dirs[0].resolve().parents:
        if not parent.stat().st_mode & 0o001:
            raise LabqError(
                f"run_as: tasks cannot reach {dirs[0]}: {parent} is closed to other users"
                " (chmod o+x it, or give the server a data directory such as /var/lib/labq)"
            )
