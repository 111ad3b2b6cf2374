"""Teuthology-style job YAML read into the canonical model.

A teuthology job is one gang: every entry of ``roles`` becomes a recipe of one
recipe set, ``machine_type`` becomes a host requirement, the numeric
``priority`` (lower is sooner) falls into one of labq's five levels and
``tasks`` become recipe tasks. Everything else is kept in job metadata: a
teuthology config is open-ended. ``targets`` force each entry of ``roles`` onto
its machine, and ``overrides`` are merged into the tasks they name.
``docs/job-format-teuthology.md`` is the reference.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import date
from typing import Any, Final

from labq.domain.distro import REQUIREMENT_KEY, teuthology_requirement
from labq.domain.job import JobSpec
from labq.domain.priority import Priority
from labq.errors import InputError
from labq.formats.limits import Limits, native_lists, teuthology_lists
from labq.formats.origins import Origins
from labq.formats.source import DocPath, LineMap, format_path, load_yaml
from labq.formats.teuthology_merge import MergeError, merge_override
from labq.formats.teuthology_tasks import COMMAND_TASKS, TaskReader
from labq.formats.yamltree import as_written

# (lowest number of the band, level); teuthology-suite's default is 1000
PRIORITY_BANDS: Final = (
    (500, Priority.LOW),
    (200, Priority.MEDIUM),
    (100, Priority.NORMAL),
    (50, Priority.HIGH),
    (1, Priority.URGENT),
)
# Keys read into the model itself; every other top-level key goes to job metadata.
_CONSUMED: Final = frozenset({"roles", "tasks", "owner", "description"})
_WHOLE_JOB_KEYS: Final = ("roles", "targets", "tasks")


def priority_level(number: int) -> Priority:
    """Teuthology's numeric priority (lower is sooner, at least 1) as a labq level."""
    for least, level in PRIORITY_BANDS:
        if number >= least:
            return level
    raise ValueError(f"priority must be at least 1, not {number}")


def parse_teuthology(text: str, *, source: str, limits: Limits | None = None) -> JobSpec:
    """Read a teuthology job document into a validated JobSpec, or raise InputError."""
    return read_teuthology(text, source=source, limits=limits)[0]


def read_teuthology(
    text: str, *, source: str, limits: Limits | None = None
) -> tuple[JobSpec, Origins]:
    """``parse_teuthology``, and where each part of the job came from in the YAML."""
    limits = limits or Limits()
    lists = teuthology_lists(limits)
    data, lines = load_yaml(text, source=source, max_depth=limits.depth, lists=lists)
    return _read_job(data, source, lines, limits)


def teuthology_job(
    data: object, *, source: str, lines: LineMap | None = None, limits: Limits | None = None
) -> JobSpec:
    """A teuthology config (one document, or fragments already deep-merged) as a JobSpec.

    ``lines`` maps places of ``data`` to lines of ``source`` for error messages;
    without it errors name the place only. Raises InputError.
    """
    return _read_job(data, source, lines or LineMap(), limits or Limits())[0]


def _read_job(data: object, source: str, lines: LineMap, limits: Limits) -> tuple[JobSpec, Origins]:
    origins = Origins(source)
    job = _Reader(source, lines, origins).job(data)
    # every recipe runs each non-exec entry: 30,000 entries on 50 machines would be
    # 1.5 million tasks to validate before check_counts refused them
    native_lists(limits).check(job, source=source, lines=origins.lines)
    return origins.validate(job), origins


class _Reader:
    def __init__(self, source: str, lines: LineMap, origins: Origins) -> None:
        self.source = source
        self.lines = lines
        self.origins = origins

    def error(self, path: DocPath, problem: str) -> InputError:
        return InputError(
            problem, source=self.source, place=format_path(path), line=self.lines.line_of(path)
        )

    def note(self, native: DocPath, path: DocPath) -> None:
        self.origins.add(native, self.lines.line_of(path), format_path(path))

    def job(self, data: object) -> dict[str, Any]:
        if not isinstance(data, Mapping):
            raise self.error((), "a teuthology job must be a mapping with 'roles'")
        for key in data:
            if not isinstance(key, str):
                raise self.error((), f"top-level keys must be text, not {key!r}")
        self.note((), ())
        if not any(key in data for key in _WHOLE_JOB_KEYS):
            raise self.error(
                (),
                "a fragment, not a whole job: it has no 'roles', 'targets' or 'tasks' "
                "(teuthology-suite merges such files into jobs)",
            )
        recipe_set: dict[str, Any] = {"recipes": self.recipes(data)}
        self.note(("recipe_sets", 0), ("roles",))
        self.recipe_set_options(data, recipe_set)
        out: dict[str, Any] = {"recipe_sets": [recipe_set]}
        out.update(self.people(data))
        ref = self.ref(data)
        if ref:
            out["ref"] = ref
        out["metadata"] = self.metadata(data)
        return out

    def recipes(self, data: Mapping[str, Any]) -> list[dict[str, Any]]:
        """One recipe per entry of ``roles``, each with the tasks for its roles."""
        targets = self.targets(data)
        roles = self.roles(data, targets)
        host = self.host(data)
        tasks = TaskReader(self.error, roles).read(self.merged_tasks(data))
        distro = self.distro(data)
        out = []
        for index, names in enumerate(roles):
            path: DocPath = ("recipe_sets", 0, "recipes", index)
            self.note(path, ("roles", index) if "roles" in data else ())
            self.note((*path, "host"), ("machine_type",))
            for j, (_, origin) in enumerate(tasks[index]):
                self.note((*path, "tasks", j), origin)
            recipe: dict[str, Any] = {"role": "+".join(names) or None, "host": host}
            recipe["tasks"] = [task for task, _ in tasks[index]]
            # the entry of 'tasks' each task came from: the set runs them in that order as one
            # plan, step by step across its recipes, as teuthology's controller does
            steps = [origin[1] for _, origin in tasks[index]]
            recipe["metadata"] = {"roles": names, "task_steps": steps}
            if distro is not None:  # the canonical distro requirement, as Beaker's lands
                recipe["metadata"][REQUIREMENT_KEY] = distro
            if index < len(targets):
                # teuthology runs entry i of roles on target i, whatever its machine type
                target, fqdn = targets[index]
                self.note((*path, "force"), ("targets", target))
                recipe.update(host={}, force=fqdn)
                recipe["metadata"]["target"] = target
            out.append(recipe)
        return out

    def distro(self, data: Mapping[str, Any]) -> dict[str, Any] | None:
        """``os_type``/``os_version`` as the canonical distro requirement (None: neither)."""
        for key in ("os_type", "os_version"):
            value = data.get(key)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, str | int | float)
            ):
                raise self.error((key,), f"'{key}' must be text, like centos or 9.stream")
        # an unquoted 8.10 reads as the float 8.1: the version is the text as written
        version = as_written(data.get("os_version"))
        return teuthology_requirement(data.get("os_type"), version)

    def targets(self, data: Mapping[str, Any]) -> list[tuple[str, str]]:
        """``(target, fqdn)`` in the order given: ``user@host`` runs on system ``host``."""
        value = data.get("targets")
        if value is None:
            return []
        if not isinstance(value, Mapping) or not value:
            raise self.error(
                ("targets",), "'targets' must be a mapping of [user@]host to its SSH host key"
            )
        out: list[tuple[str, str]] = []
        seen: dict[str, str] = {}
        for target in value:
            fqdn = target.rpartition("@")[2].strip() if isinstance(target, str) else ""
            if not fqdn:
                raise self.error(("targets",), f"a target must be [user@]host, not {target!r}")
            if fqdn in seen:
                raise self.error(
                    ("targets", target), f"targets {seen[fqdn]!r} and {target!r} are one host"
                )
            seen[fqdn] = target
            out.append((target, fqdn))
        return out

    def roles(self, data: Mapping[str, Any], targets: list[tuple[str, str]]) -> list[list[str]]:
        """The role names of each machine.

        Without ``roles`` teuthology gives each target no role, and with neither it
        runs the tasks without machines; labq runs them on one system, with no role.
        """
        if "roles" not in data:
            return [[] for _ in targets] or [[]]
        roles = data["roles"]
        if not isinstance(roles, list) or not roles:
            raise self.error(("roles",), "'roles' must be a non-empty list of lists of role names")
        for i, entry in enumerate(roles):
            if not isinstance(entry, list) or not entry:
                raise self.error(
                    ("roles", i), "each entry of 'roles' must be a non-empty list of role names"
                )
            # one role name may be on several machines (teuthology's parallel_example)
            seen: set[str] = set()
            for j, name in enumerate(entry):
                if not isinstance(name, str) or not name.strip():
                    raise self.error(("roles", i, j), f"a role name must be text, not {name!r}")
                if name in seen:
                    raise self.error(
                        ("roles", i, j), f"role {name!r} is given twice on one machine"
                    )
                seen.add(name)
        if targets and len(targets) < len(roles):
            raise self.error(
                ("targets",),
                f"{len(roles)} targets are needed, one per entry of 'roles', "
                f"but {len(targets)} are given",
            )
        return roles

    def merged_tasks(self, data: Mapping[str, Any]) -> object:
        """``tasks`` with ``overrides[name]`` deep-merged into each task called ``name``."""
        tasks, overrides = data.get("tasks"), data.get("overrides")
        if overrides is None:
            return tasks
        if not isinstance(overrides, Mapping):
            raise self.error(("overrides",), "'overrides' must be a mapping of task name to config")
        if not isinstance(tasks, list):
            return tasks  # TaskReader says what is wrong with it
        out: list[object] = []
        for k, entry in enumerate(tasks):
            if isinstance(entry, Mapping) and len(entry) == 1:
                ((name, config),) = entry.items()
                if name in overrides and name not in COMMAND_TASKS:
                    entry = {name: self.merge(config, overrides[name], ("tasks", k, name))}
            out.append(entry)
        return out

    def merge(self, config: object, override: object, task: DocPath) -> object:
        try:
            return merge_override(config, override)
        except MergeError as exc:
            where = ("overrides", task[-1], *exc.path)
            raise self.error(
                where, f"cannot be merged into {format_path((*task, *exc.path))}: {exc.problem}"
            ) from None

    def recipe_set_options(self, data: Mapping[str, Any], out: dict[str, Any]) -> None:
        if "priority" in data:
            number = self.whole(data, "priority")
            self.note(("recipe_sets", 0, "priority"), ("priority",))
            out["priority"] = priority_level(number).label
        given = [k for k in ("max_job_time", "timeout") if k in data]
        if len(given) > 1:
            raise self.error(("timeout",), "give only one of 'max_job_time' and 'timeout'")
        for key in given:
            self.note(("recipe_sets", 0, "max_time"), (key,))
            out["max_time"] = self.whole(data, key)

    def whole(self, data: Mapping[str, Any], key: str) -> int:
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.error((key,), f"'{key}' must be a whole number of at least 1, not {value!r}")
        return value

    def host(self, data: Mapping[str, Any]) -> dict[str, Any]:
        if "machine_type" not in data:
            return {}
        value = data["machine_type"]
        parts = [p.strip() for p in value.split(",")] if isinstance(value, str) else []
        if not parts or not all(parts):
            raise self.error(
                ("machine_type",),
                f"'machine_type' must be a name or comma-separated names, not {value!r}",
            )
        return {"machine_type": parts[0] if len(parts) == 1 else parts}

    def people(self, data: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, field in (
            ("owner", "owner"),
            ("description", "whiteboard"),
            ("name", "whiteboard"),
        ):
            if key not in data or field in out:
                continue
            if not isinstance(data[key], str):
                raise self.error((key,), f"'{key}' must be text, not {data[key]!r}")
            self.note((field,), (key,))
            out[field] = data[key]
        return out

    def ref(self, data: Mapping[str, Any]) -> dict[str, Any]:
        for key in ("suite_repo", "repo", "suite_branch", "branch", "suite_sha1", "sha1"):
            if key in data and not isinstance(data[key], str):
                raise self.error((key,), f"'{key}' must be text (quote it), not {data[key]!r}")
        repo_key = "suite_repo" if "suite_repo" in data else "repo"
        if repo_key not in data:
            return {}  # labq does not guess a repository: sha1/branch stay in metadata
        ref: dict[str, Any] = {"repo": data[repo_key]}
        self.note(("ref",), (repo_key,))
        branch_key = "suite_branch" if "suite_branch" in data else "branch"
        # sha1 names a commit of 'repo' on 'branch': the workspace only when it is that repo
        same_tree = "suite_repo" not in data and "suite_branch" not in data
        commit_key = "suite_sha1" if "suite_sha1" in data else ("sha1" if same_tree else None)
        keys: tuple[tuple[str, str | None], ...] = (
            ("repo", repo_key),
            ("branch", branch_key),
            ("commit", commit_key),
        )
        for native, given in keys:
            if given is not None and given in data:
                ref[native] = data[given]
                self.note(("ref", native), (given,))
        return ref

    def metadata(self, data: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key not in _CONSUMED:
                out[key] = plain(self, (key,), value)
                self.note(("metadata", key), (key,))
        return out


def plain(reader: _Reader, path: DocPath, value: object) -> Any:
    """``value`` as plain JSON data, so that metadata survives the canonical round trip."""

    def fallback(thing: object) -> object:
        if isinstance(thing, date):  # datetime is a date too
            return thing.isoformat()
        if isinstance(thing, set | frozenset):
            return sorted(thing, key=str)
        raise TypeError(f"{type(thing).__name__} values are not supported")

    try:
        return json.loads(json.dumps(value, default=fallback, allow_nan=False))
    except (TypeError, ValueError) as exc:
        problem = str(exc) if isinstance(exc, TypeError) else "not a finite number"
        raise reader.error(path, problem) from None
