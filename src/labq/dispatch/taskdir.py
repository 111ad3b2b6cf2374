"""How a fetched task directory is run, as restraint runs it.

Restraint reads the task directory's ``metadata`` file (an ini file:
``[General] name``; ``[restraint] entry_point``, ``max_time``,
``dependencies``, ``softDependencies``, ``environment``…) or, in older tasks,
RHTS's ``testinfo.desc`` (``Name:``, ``TestTime:``, ``Requires:``). The
program is ``entry_point`` when given, else ``make run`` where there is a
``Makefile``, else ``runtest.sh``. labq does the same, in the task's copy in
the workspace; it installs no packages: ``dependencies`` are listed in the
task's log for the lab's image to provide.
"""

from __future__ import annotations

import configparser
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from labq.errors import LabqError

_TIME: Final = re.compile(r"^\s*([0-9]+)\s*([dhms]?)\s*$", re.IGNORECASE)
_UNITS: Final = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_TIME_PARAMS: Final = ("RSTRNT_MAX_TIME", "KILLTIMEOVERRIDE")  # restraint's overrides


class TaskDirError(LabqError):
    """A task directory labq cannot run; the message says why."""


@dataclass(frozen=True)
class TaskDir:
    """What running one task directory takes."""

    command: tuple[str, ...]  # argv, run in the task directory
    name: str | None = None  # [General] name: overrides the job's name, as in restraint
    max_time: float | None = None
    environment: dict[str, str] = field(default_factory=dict)
    dependencies: tuple[str, ...] = ()


def parse_time(text: str) -> float:
    """Restraint's durations: ``90``, ``90s``, ``5m``, ``2h``, ``1d``."""
    found = _TIME.match(text)
    if not found or int(found.group(1)) == 0:
        raise TaskDirError(f"{text!r} is not a duration (a number with d, h, m or s)")
    return float(int(found.group(1)) * _UNITS[found.group(2).lower()])


def read_task_dir(path: Path) -> TaskDir:
    """How to run the task directory at ``path``; :class:`TaskDirError` if it cannot run."""
    if (path / "metadata").is_file():
        name, entry, max_time, env, deps = _metadata(path / "metadata")
    elif (path / "testinfo.desc").is_file():
        name, entry, max_time, env, deps = _testinfo(path / "testinfo.desc")
    else:
        name, entry, max_time, env, deps = None, None, None, {}, ()
    if entry is not None:
        try:
            command = tuple(shlex.split(entry))
        except ValueError as exc:
            raise TaskDirError(f"metadata entry_point {entry!r} cannot be split: {exc}") from None
        if not command:
            raise TaskDirError("metadata entry_point is empty")
    else:
        command = _default_command(path)
    return TaskDir(command, name, max_time, env, deps)


def _default_command(path: Path) -> tuple[str, ...]:
    if (path / "Makefile").is_file():
        return ("make", "run")
    script = path / "runtest.sh"
    if script.is_file():
        if os.access(script, os.X_OK):
            return ("./runtest.sh",)
        # not marked executable (as in some tarballs): run it with its #! interpreter
        with open(script, "rb") as f:
            first = f.readline(256).decode(errors="replace")
        interpreter = shlex.split(first[2:]) if first.startswith("#!") else ["/bin/sh"]
        return (*(interpreter or ["/bin/sh"]), "./runtest.sh")
    raise TaskDirError("the task directory has no metadata entry_point, Makefile or runtest.sh")


_Read = tuple[str | None, str | None, float | None, dict[str, str], tuple[str, ...]]


def _metadata(file: Path) -> _Read:
    ini = configparser.ConfigParser(interpolation=None, strict=False)
    ini.optionxform = str  # type: ignore[assignment,method-assign]  # keys keep their case
    try:
        ini.read_string(file.read_text(errors="replace"), source=str(file))
    except configparser.Error as exc:
        raise TaskDirError(f"metadata cannot be read: {exc.message}") from None
    general = ini["General"] if ini.has_section("General") else {}
    own = ini["restraint"] if ini.has_section("restraint") else {}
    max_time = parse_time(own["max_time"]) if own.get("max_time") else None
    env: dict[str, str] = {}
    for item in _list(own.get("environment")):
        key, sep, value = item.partition("=")
        if not sep:
            raise TaskDirError(f"metadata environment item {item!r} is not NAME=value")
        env[key.strip()] = value
    deps = (*_list(own.get("dependencies")), *_list(own.get("softDependencies")))
    return general.get("name") or None, own.get("entry_point") or None, max_time, env, deps


def _testinfo(file: Path) -> _Read:
    fields: dict[str, list[str]] = {}
    for line in file.read_text(errors="replace").splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            fields.setdefault(key.strip(), []).append(value.strip())
    name = next(iter(fields.get("Name", [])), None) or None
    test_time = next(iter(fields.get("TestTime", [])), None)
    max_time = parse_time(test_time) if test_time else None
    deps = tuple(d for v in fields.get("Requires", []) for d in v.split())
    return name, None, max_time, {}, deps


def _list(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(";") if p.strip()]
