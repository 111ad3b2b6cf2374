"""The ``tasks`` list of a teuthology job, as labq recipe tasks.

``exec`` (and ``sh``) entries carry shell commands per role: each command
becomes one labq task with ``run`` on the recipe holding that role, so a failing
command stops the recipe as it stops teuthology's ``exec``. Every other entry
(``install``, ``ceph``, ``workunit`` ...) is a named task that each recipe runs
from the job's workspace, with its configuration as parameters.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping
from typing import Any, Final

from labq.domain.job import MAX_NAME
from labq.errors import InputError
from labq.formats.source import DocPath

COMMAND_TASKS: Final = frozenset({"exec", "sh"})
_EVERY_ROLE: Final = frozenset({"all", "all-roles"})
_EVERY_HOST: Final = "all-hosts"
_OPTIONS: Final = frozenset({"timeout", "retry", "sleep_for_retry"})

Planned = list[list[tuple[dict[str, Any], DocPath]]]  # per recipe: (task, where it came from)
# The job reader's way to say what is wrong at a place of the document (with its line)
ErrorAt = Callable[[DocPath, str], InputError]


class TaskReader:
    """Turns teuthology task entries into per-recipe labq tasks."""

    def __init__(self, error: ErrorAt, roles: list[list[str]]) -> None:
        self.error = error
        self.roles = roles
        self.recipes_of: dict[str, list[int]] = {}
        for i, names in enumerate(roles):
            for name in names:
                self.recipes_of.setdefault(name, []).append(i)

    def read(self, tasks: object) -> Planned:
        """The tasks of every recipe, in order, with the teuthology path of each."""
        out: Planned = [[] for _ in self.roles]
        if tasks is None:
            return out
        if not isinstance(tasks, list):
            raise self.error(("tasks",), "'tasks' must be a list of {name: config} entries")
        for k, entry in enumerate(tasks):
            path: DocPath = ("tasks", k)
            if not isinstance(entry, Mapping) or len(entry) != 1:
                got = f"{len(entry)} keys" if isinstance(entry, Mapping) else repr(entry)
                raise self.error(
                    path, f"a task entry must be a mapping with exactly one key, got {got}"
                )
            ((name, config),) = entry.items()
            if not isinstance(name, str) or not name:
                raise self.error(path, f"a task name must be text, not {name!r}")
            if name in COMMAND_TASKS:
                self.commands(name, config, (*path, name), out)
            else:
                task = {"name": name, "params": self.params(config)}
                for planned in out:
                    planned.append((task, path))
        return out

    def commands(self, name: str, config: object, path: DocPath, out: Planned) -> None:
        """Append one task per command to the recipes holding each named role."""
        if not isinstance(config, Mapping):
            raise self.error(path, f"'{name}' takes a mapping of role to commands")
        timeout = self.seconds(config, "timeout", path, least=1)
        tries = self.seconds(config, "retry", path, least=1)
        pause = self.seconds(config, "sleep_for_retry", path, least=0)
        if tries is not None and timeout is not None:
            # labq's timeout is the task's: room for every try of teuthology's per-try timeout
            timeout = tries * timeout + (tries - 1) * (1 if pause is None else pause)
        for role, commands in config.items():
            if role in _OPTIONS:
                continue
            where = (*path, str(role))
            for recipe, task_role in self.targets(role, where):
                for i, command in enumerate(self.command_list(commands, where)):
                    run = command if tries is None else retried(command, tries, pause)
                    task: dict[str, Any] = {"name": name, "run": run}
                    if task_role is not None:
                        task["role"] = task_role
                    if timeout is not None:
                        task["timeout"] = timeout
                    out[recipe].append((task, (*where, i)))

    def targets(self, role: object, where: DocPath) -> list[tuple[int, str | None]]:
        """(recipe, role) pairs a role key of ``exec`` runs on."""
        if role in _EVERY_ROLE:
            return [(i, r) for i, names in enumerate(self.roles) for r in names]
        if role == _EVERY_HOST:
            return [(i, None) for i in range(len(self.roles))]
        if not isinstance(role, str) or role not in self.recipes_of:
            raise self.error(where, f"role {role!r} is not in 'roles'")
        holders = self.recipes_of[role]
        if len(holders) > 1:
            # teuthology's exec takes the one machine of a role: (remote,) = only(role)
            entries = ", ".join(f"roles[{i}]" for i in holders)
            raise self.error(
                where,
                f"role {role!r} is on {len(holders)} machines ({entries}); exec runs a "
                "role's commands on exactly one: name a role of one machine, or all-hosts",
            )
        return [(holders[0], role)]

    def command_list(self, commands: object, where: DocPath) -> list[str]:
        if not isinstance(commands, list):
            raise self.error(where, "commands must be a list of text")
        for i, command in enumerate(commands):
            if not isinstance(command, str) or not command.strip():
                raise self.error((*where, i), f"a command must be text (quote it), not {command!r}")
        return commands

    def seconds(
        self, config: Mapping[Any, Any], key: str, path: DocPath, *, least: int
    ) -> int | None:
        value = config.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise self.error(
                (*path, key), f"'{key}' must be a whole number, at least {least}, not {value!r}"
            )
        return value

    @staticmethod
    def params(config: object) -> dict[str, Any]:
        """A flat mapping of text keys to scalars as is, anything else as JSON text."""
        if config is None:
            return {}
        if isinstance(config, Mapping) and all(
            isinstance(k, str)
            and 0 < len(k) <= MAX_NAME
            and isinstance(v, str | int | float | bool)
            for k, v in config.items()
        ):
            return dict(config)
        try:
            text = json.dumps(config, sort_keys=True, default=str)
        except TypeError:  # keys of mixed types cannot be sorted
            text = json.dumps(config, default=str)
        return {"config": text}


def retried(command: str, tries: int, pause: int | None) -> str:
    """``command`` tried up to ``tries`` times, ``pause`` seconds apart (teuthology's exec
    ``retry``/``sleep_for_retry``, default 1 s); it fails when the last try fails."""
    wait = 1 if pause is None else pause
    return (
        f"n=0; while :; do n=$((n + 1)); /bin/sh -c {shlex.quote(command)} && exit 0; "
        f'[ "$n" -ge {tries} ] && exit 1; sleep {wait}; done'
    )
