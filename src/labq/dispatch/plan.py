"""What a supervisor is asked to run: a recipe set, its recipes, their tasks.

Plans are plain frozen values built by the supervisor glue from the database
(or by a test by hand); the execution library never reads the database.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Final

from labq.errors import LabqError

Scalar = str | int | float | bool

# a name is refused as a task name path component when it could step outside tasks/
_BAD_COMPONENTS: Final = frozenset({"", ".", ".."})


class PlanError(LabqError):
    """A plan that cannot be run as given: names the task or recipe and the problem."""


@dataclass(frozen=True)
class SystemInfo:
    """The machine a recipe runs on, as the backends and hooks see it."""

    fqdn: str
    lab: str
    arch: str = "x86_64"
    attributes: Mapping[str, Scalar] = field(default_factory=dict)
    address: str | None = None  # where to connect (ssh); the fqdn when None
    guest_of: str | None = None  # a guest: the fqdn of the system that provides it
    guest_args: str | None = None  # a guest: how to make it (Beaker guestargs)

    @property
    def host(self) -> str:
        """The address to reach the system at."""
        return self.address or self.fqdn


@dataclass(frozen=True)
class TaskPlan:
    """One step of a recipe: a shell command, or a named task from the workspace."""

    id: int
    name: str
    command: str | None = None
    params: Mapping[str, Scalar] = field(default_factory=dict)
    timeout: float | None = None
    role: str | None = None
    step: int | None = None  # its place in the set's one ordered task list (steps.py)
    fetch_url: str | None = None  # fetched at run time into the workspace (restraint's way)
    fetch_subdir: str | None = None


@dataclass(frozen=True)
class GuestPlan:
    """A guest recipe: its tasks run, in order, on a guest of its host recipe's system.

    ``system`` describes the guest (its ``guest_of`` is the host's fqdn).
    """

    system: SystemInfo
    tasks: tuple[TaskPlan, ...] = ()
    role: str | None = None


@dataclass(frozen=True)
class RecipePlan:
    """The tasks to run, in order, on one system, and the guests it provides."""

    id: int
    system: SystemInfo
    tasks: tuple[TaskPlan, ...] = ()
    role: str | None = None
    guests: tuple[GuestPlan, ...] = ()
    provision: Mapping[str, str] = field(default_factory=dict)  # for the reimage hook


@dataclass(frozen=True)
class SetPlan:
    """A recipe set: recipes that run at once, each on its own system.

    ``env`` holds extra variables for every task (an API token, say). Their
    values are treated as secrets: they are masked in every log labq writes.
    """

    id: int
    job_id: int
    recipes: tuple[RecipePlan, ...]
    max_time: float | None = None
    ref_repo: str | None = None
    ref_commit: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def secrets(self) -> tuple[str, ...]:
        """The values to mask in logs."""
        return tuple(v for v in self.env.values() if v)


@dataclass(frozen=True)
class Workspace:
    """What ``provision`` puts on a system, and where it may leave its own logs.

    ``checkout`` is a local directory holding the pinned ref's files (None when
    the job pins nothing: the workspace starts empty).
    """

    log_dir: Path
    checkout: Path | None = None
    commit: str | None = None
    provision: Mapping[str, str] = field(default_factory=dict)  # the reimage hook's extra env


def task_path(name: str) -> PurePosixPath:
    """Where a named task lives in a workspace: ``tasks/<name without leading slash>/run``."""
    parts = PurePosixPath(name.lstrip("/")).parts if name.strip("/") else ()
    if not parts or any(p in _BAD_COMPONENTS for p in parts) or "\0" in name:
        raise PlanError(f"task name {name!r} cannot name a directory under tasks/")
    return PurePosixPath("tasks", *parts, "run")


_SAFE_COMPONENT: Final = re.compile(r"^[^/\0]+$")


def safe_component(name: str, what: str) -> str:
    """``name`` when it can be one directory name (no slash, not ``.``/``..``); else raise."""
    if not _SAFE_COMPONENT.match(name) or name in _BAD_COMPONENTS:
        raise PlanError(f"{what} {name!r} cannot be used as a directory name")
    return name


def scalar_text(value: object) -> str:
    """A parameter or attribute value as environment text (booleans as true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise PlanError(f"value {value!r} is not a string, number or boolean")
