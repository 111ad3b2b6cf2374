"""A teuthology suite directory expanded into jobs, as ``teuthology-suite`` does.

The directory is read into a :mod:`~labq.formats.suite_matrix` tree (``%``
convolve, ``+`` concatenate, ``$`` or a name ending in ``$`` pick one at
random, plain directories one job per member; names starting with ``.`` and
directories ending in ``.disable`` are skipped; only ``*.yaml`` files are
fragments; symbolic links, such as ceph's ``.qa`` ones, are followed). The
chosen subset is taken from it, each combination is named by its description,
filtered on that description, and its fragments are deep-merged in path order
into one teuthology job document. ``docs/job-format-teuthology.md`` tells the
rest.
"""

from __future__ import annotations

import copy
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from labq.domain.job import JobSpec
from labq.errors import InputError
from labq.formats import suite_matrix as m
from labq.formats.source import load_yaml, read_document
from labq.formats.teuthology import parse_teuthology

FRAGMENT_SUFFIX: Final = ".yaml"
MAX_JOBS: Final = 10_000  # a suite that expands further is refused, not half submitted


@dataclass(frozen=True)
class Subset:
    """``--subset index/outof``: the index-th of outof slices that each cover every facet."""

    index: int
    outof: int

    @classmethod
    def parse(cls, text: str) -> Subset:
        """``"2/5"`` read and checked."""
        left, _, right = text.partition("/")
        try:
            index, outof = int(left), int(right)
        except ValueError:
            raise InputError(f"--subset must be INDEX/OUTOF, not {text!r}") from None
        if outof < 1 or not 0 <= index < outof:
            raise InputError(f"--subset {text}: need 0 <= INDEX < OUTOF")
        return cls(index, outof)


@dataclass(frozen=True)
class SuiteJob:
    """One combination: its description, fragment files (merge order) and merged config."""

    description: str
    paths: tuple[Path, ...]
    config: dict[str, Any]

    def document(self) -> str:
        """The merged config as a teuthology job document."""
        return yaml.safe_dump(self.config, sort_keys=False, default_flow_style=False)

    def spec(self) -> JobSpec:
        """The job as labq reads it (the teuthology reader's rules), or InputError naming it."""
        return parse_teuthology(self.document(), source=self.description)


def suite_name(directory: Path) -> str:
    """``rados/singleton`` for ``…/suites/rados/singleton``; else the directory's name."""
    parts = directory.resolve().parts
    if "suites" in parts[:-1]:
        last = len(parts) - 1 - parts[::-1].index("suites")
        return "/".join(parts[last + 1 :])
    return directory.resolve().name


def expand(
    directory: Path,
    *,
    seed: int,
    subset: Subset | None = None,
    filter_in: Sequence[str] = (),
    filter_out: Sequence[str] = (),
    name: str | None = None,
) -> list[SuiteJob]:
    """Every job of the suite at ``directory``, in teuthology's order."""
    if not directory.is_dir():
        raise InputError("is not a suite directory", source=str(directory))
    rng = random.Random(seed)  # noqa: S311 - a reproducible pick, not a secret
    mincyclicity = subset.outof if subset else 0
    root = _Builder(rng, mincyclicity).build(directory, "", frozenset())
    if root is None:
        raise InputError("has no *.yaml fragments", source=str(directory))
    first, last = _range(root.size(), subset)
    if last - first > MAX_JOBS:
        raise InputError(
            f"expands to {last - first} jobs, more than {MAX_JOBS}: use --subset",
            source=str(directory),
        )
    prefix = suite_name(directory) if name is None else name
    merger = _Merger()
    out = []
    for i in range(first, last):
        result = root.index(i)
        desc = m.join(prefix, m.description(result))
        if not _wanted(desc, filter_in, filter_out):
            continue
        paths = tuple(directory.joinpath(*(p for p in parts if p)) for parts in m.fragments(result))
        out.append(SuiteJob(desc, paths, merger.merge(desc, paths)))
    return out


def _range(size: int, subset: Subset | None) -> tuple[int, int]:
    if subset is None:
        return 0, size
    step = size // subset.outof
    last = size if subset.index == subset.outof - 1 else step * (subset.index + 1)
    return step * subset.index, last


def _wanted(desc: str, filter_in: Sequence[str], filter_out: Sequence[str]) -> bool:
    """teuthology's ``--filter`` (any word in the description) and ``--filter-out``."""
    if filter_in and not any(word in desc for word in filter_in):
        return False
    return not any(word in desc for word in filter_out)


def split_words(values: Sequence[str]) -> list[str]:
    """``--filter a,b --filter c`` as ``[a, b, c]`` (teuthology splits on commas)."""
    return [w.strip() for v in values for w in v.split(",") if w.strip()]


class _Builder:
    def __init__(self, rng: random.Random, mincyclicity: int) -> None:
        self.rng = rng
        self.mincyclicity = mincyclicity

    def build(self, path: Path, item: str, seen: frozenset[str]) -> m.Matrix | None:
        """The matrix of one file or directory (None: it holds no fragment)."""
        if path.name.startswith("."):
            return None  # ceph's .qa links and hidden files are never facets themselves
        if not path.exists():
            raise InputError("is a dangling link", source=str(path))
        if path.is_file():
            return m.Base(item) if path.name.endswith(FRAGMENT_SUFFIX) else None
        if not path.is_dir() or path.name.endswith(".disable"):
            return None
        real = os.path.realpath(path)
        if real in seen:
            raise InputError("links back to a directory that contains it", source=str(path))
        names = sorted(p.name for p in path.iterdir())
        return self._directory(path, item, names, seen | {real})

    def _directory(
        self, path: Path, item: str, names: list[str], seen: frozenset[str]
    ) -> m.Matrix | None:
        def members(cyclicity: int, skip: tuple[str, ...]) -> list[m.Matrix]:
            self_min, self.mincyclicity = self.mincyclicity, cyclicity
            try:
                found = [self.build(path / n, n, seen) for n in names if n not in skip]
            finally:
                self.mincyclicity = self_min
            return [f for f in found if f is not None]

        if "+" in names:
            found = members(self.mincyclicity, ("+",))
            return m.Concat(item, found) if found else None
        if "$" in names or path.name.endswith("$"):
            found = members(self.mincyclicity, ("$", "%"))
            return m.PickRandom(item, found, self.rng) if found else None
        if "%" in names:
            found = members(0, ("%",))
            return self._cycled(m.Product(item, found)) if found else None
        found = [self._cycled(f) for f in members(self.mincyclicity, ())]
        return m.Sum(item, found) if found else None

    def _cycled(self, mat: m.Matrix) -> m.Matrix:
        """Repeat a matrix too small to give every slice of a subset a good sample."""
        cyclicity = mat.cyclicity()
        if cyclicity < self.mincyclicity:
            return m.Cycle((self.mincyclicity + cyclicity - 1) // cyclicity, mat)
        return mat


class _Merger:
    """Fragments read once each, deep-merged per combination."""

    def __init__(self) -> None:
        self.cache: dict[Path, object] = {}

    def merge(self, desc: str, paths: Sequence[Path]) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for path in paths:
            fragment = self.read(path)
            if fragment is None:
                continue
            try:
                deep_merge(merged, copy.deepcopy(fragment))
            except InputError as exc:
                raise InputError(f"{exc.problem} (merging into {desc})", source=str(path)) from None
        merged["description"] = desc
        return merged

    def read(self, path: Path) -> object:
        if path not in self.cache:
            text = read_document(path)
            if not _has_content(text):
                self.cache[path] = None  # an empty fragment adds nothing, as in teuthology
                return None
            data, lines = load_yaml(text, source=str(path))
            if data is not None and not isinstance(data, dict):
                raise InputError("a suite fragment must be a mapping", source=str(path), line=1)
            scripts = (data or {}).get("teuthology")
            if isinstance(scripts, dict) and ({"premerge", "postmerge"} & scripts.keys()):
                line = lines.line_of(("teuthology",))
                raise InputError(
                    "premerge/postmerge Lua scripts are not run by labq; filter with --filter-out",
                    source=str(path),
                    line=line,
                    place="teuthology",
                )
            self.cache[path] = data
        return self.cache[path]


def _has_content(text: str) -> bool:
    return any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines())


def deep_merge(into: Any, other: Any) -> Any:
    """teuthology's ``deep_merge``: mappings merge key by key, lists extend, else ``other`` wins.

    ``into`` is changed in place when it is a mapping or a list; the result is returned.
    """
    if other is None:
        return into
    if into is None:
        return copy.deepcopy(other)
    if isinstance(into, list):
        if not isinstance(other, list):
            raise InputError(f"cannot merge {type(other).__name__} into a list")
        into.extend(other)
        return into
    if isinstance(into, dict):
        if not isinstance(other, dict):
            raise InputError(f"cannot merge {type(other).__name__} into a mapping")
        for key, value in other.items():
            into[key] = deep_merge(into.get(key), value)
        return into
    return other
