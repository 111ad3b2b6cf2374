"""Durations as people type them on the command line: ``90s``, ``30m``, ``2h``, ``1h30m``."""

from __future__ import annotations

import re
from typing import Final

from labq.errors import InputError

_DURATION: Final = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw]?)")
_UNIT: Final = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str, *, place: str = "--for") -> float:
    """``90s``, ``30m``, ``2h``, ``1d``, ``1h30m`` or plain seconds, as seconds."""
    spaced = text.strip().lower()
    parts = list(_DURATION.finditer(spaced))
    covered = "".join(m.group(0) for m in parts).replace(" ", "")
    if not parts or covered != spaced.replace(" ", ""):
        raise InputError(f"{text!r} is not a duration (e.g. 90s, 30m, 2h, 1d)", place=place)
    seconds = sum(float(m.group(1)) * _UNIT[m.group(2)] for m in parts)
    if seconds <= 0:
        raise InputError(f"{text!r} is not a duration longer than nothing", place=place)
    return seconds
