"""Sending a set's log files to the server, a chunk at a time, from where the server is.

Log files only grow (:class:`~labq.dispatch.logs.MaskedLog` appends), so a file
is sent as ``(offset, bytes)`` chunks: the server appends a chunk that starts
at its size, keeps what it has of one that overlaps (a chunk sent again after a
lost answer), and refuses one that would leave a gap, saying its size. Either
way the answer is the server's size, and the next chunk starts there — so
nothing is lost or written twice, and an agent that restarted and knows no
offsets starts at 0 and skips ahead at the first answer.

Files under a ``collected/`` directory are rewritten in place when the
supervisor masks secrets in them at archive time, so they are sent only once
the supervisor has exited (``final``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

CHUNK: Final = 256 * 1024  # the most the server takes in one call
COLLECTED: Final = "collected"
_MASKING: Final = re.compile(r"^\..*\.masking$")  # labq.dispatch.logs.mask_tree's temporary files

# send(relative path, offset, chunk) -> the server's size of that file after it
Send = Callable[[str, int, bytes], int]


class LogUploader:
    """Keeps the server's copy of one set's log directory up to date."""

    def __init__(self, root: Path, send: Send, *, chunk: int = CHUNK) -> None:
        self.root = root
        self.send = send
        self.chunk = chunk
        self.offsets: dict[str, int] = {}  # what the server has of each file, as far as known

    def files(self, *, final: bool) -> Iterator[tuple[str, Path]]:
        """Every log file to send, by its path relative to the root (``collected/`` ones
        only when ``final``)."""
        for folder, dirs, names in os.walk(self.root):  # does not follow symbolic links
            if not final:
                dirs[:] = [d for d in dirs if d != COLLECTED]
            dirs.sort()
            for name in sorted(names):
                path = Path(folder, name)
                if _MASKING.match(name) or path.is_symlink() or not path.is_file():
                    continue
                yield path.relative_to(self.root).as_posix(), path

    def upload(self, *, final: bool = False) -> bool:
        """Send what the server lacks; True when it has every file whole (as of now).

        An error from ``send`` (the network) is left to the caller: what was
        sent before it is remembered, and the next call goes on from there.
        """
        whole = True
        for rel, path in self.files(final=final):
            if not self._upload_file(rel, path):
                whole = False
        return whole

    def _upload_file(self, rel: str, path: Path) -> bool:
        with path.open("rb") as f:
            while True:
                offset = self.offsets.get(rel, 0)
                f.seek(offset)
                data = f.read(self.chunk)
                if not data and rel in self.offsets:
                    return True
                size = self.send(rel, offset, data)
                self.offsets[rel] = size
                if size == offset and data:
                    return False  # the server took nothing: try again later
                if not data:
                    return True
