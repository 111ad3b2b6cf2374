"""teuthology's ``deep_merge``, and ``overrides`` merged into the tasks they name.

teuthology builds a job by deep-merging YAML fragments (``teuthology-suite``),
and each of its tasks deep-merges ``overrides[<task name>]`` into its own
config before it runs. labq does both before the job is stored, so the config
a task receives is the merged one. The merge follows ``teuthology.misc.deep_merge``:
``None`` gives way to the other side, lists are concatenated, mappings merge key
by key, and any other value is replaced. The mismatches teuthology asserts
against (a list given a mapping, a mapping given a scalar) are errors here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from labq.formats.source import DocPath


class MergeError(ValueError):
    """Two values that ``deep_merge`` cannot combine; ``path`` is where, below the top."""

    def __init__(self, path: DocPath, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(problem)


def deep_merge(base: object, extra: object, path: DocPath = ()) -> Any:
    """``extra`` merged into ``base`` as teuthology merges configs; neither is modified."""
    if base is None:
        return extra
    if extra is None:
        return base
    if isinstance(base, list):
        if not isinstance(extra, list):
            raise MergeError(path, f"a list cannot take {_kind(extra)}")
        return [*base, *extra]
    if isinstance(base, Mapping):
        if not isinstance(extra, Mapping):
            raise MergeError(path, f"a mapping cannot take {_kind(extra)}")
        out = dict(base)
        for key, value in extra.items():
            out[key] = deep_merge(out[key], value, (*path, key)) if key in out else value
        return out
    return extra


def merge_override(config: object, override: object) -> Any:
    """A task's config with its ``overrides`` entry merged in.

    A list of role names given a mapping is first read as ``{role: None, ...}``,
    as teuthology's role-taking tasks (``rgw``, ``ceph-fuse``, ``kclient``) do
    before they merge their overrides.
    """
    if (
        isinstance(config, list)
        and isinstance(override, Mapping)
        and all(isinstance(item, str) for item in config)
    ):
        config = dict.fromkeys(config)
    return deep_merge(config, override)


def _kind(value: object) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"the value {value!r}"
