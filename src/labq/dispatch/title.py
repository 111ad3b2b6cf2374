"""A forked process's command line, rewritten in place so ``/proc/PID/cmdline`` names it.

A supervisor forked by the fork server runs no new program, so its command line
would stay the fork server's. The dispatcher recognises a supervisor by its
command line (:func:`labq.dispatch.dispatcher.is_supervisor`), after a restart
too, so the child writes its own over the memory the kernel reads it from (what
``setproctitle`` does). The fork server is started with spare room on its
command line for the longest title.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path
from typing import Final

ROOM: Final = " " * 96  # a spare argument the fork server is started with, for titles
_ARG_START: Final = 47  # 0-based fields of /proc/self/stat (arg_start, arg_end)


def arg_area() -> tuple[int, int]:
    """Where this process's command line lies in its memory: ``(start, end)``."""
    text = Path("/proc/self/stat").read_text()
    fields = text[text.rfind(")") + 2 :].split()
    # fields here start at the third (state): shift the kernel's numbering by two
    return int(fields[_ARG_START - 2]), int(fields[_ARG_START - 1])


def set_title(args: Sequence[str], area: tuple[int, int] | None = None) -> None:
    """Make ``args`` this process's command line (cut to the room there is).

    The rest of the area is zeroed, so ``/proc/PID/cmdline`` reads as ``args``
    followed by empty arguments.
    """
    start, end = area or arg_area()
    size = end - start
    if size <= 0:
        return
    raw = b"\0".join(a.encode() for a in args)[: size - 1]
    ctypes.memmove(start, raw.ljust(size, b"\0"), size)
