"""Each lab's distro trees: everyone lists them; admins import, add and remove them.

A change is written in the caller's transaction and told to the scheduler as
``DistrosChanged(lab)`` on ``sink``, which the adapter delivers after the commit:
which systems a recipe may run on depends on the trees its lab carries.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from labq.domain.distro import DistroTree, family_for_os
from labq.domain.events import DistrosChanged, EventSink
from labq.domain.model import User
from labq.errors import InputError
from labq.formats.treeinfo import read_treeinfo
from labq.store import Repository
from labq.usecases.permissions import require_admin

_WORD: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+:@~-]*$")
_URL_SCHEMES: Final = ("http://", "https://", "ftp://", "nfs://", "file://", "/")


@dataclass(frozen=True)
class Image:
    """A tree without a ``.treeinfo`` (a Teuthology-style image), as an admin gives it."""

    lab: str
    name: str
    arch: str
    os_type: str
    os_version: str
    machine_types: frozenset[str] = frozenset()
    family: str = ""  # derived from the os type and version when not given
    variant: str = ""
    kernel: str = ""
    initrd: str = ""
    repos: tuple[tuple[str, str], ...] = ()
    tags: frozenset[str] = field(default_factory=frozenset)


def list_trees(repo: Repository, lab: str | None = None) -> list[DistroTree]:
    """The trees of one lab (which must exist) or of every lab."""
    if lab is not None:
        repo.db.lab_id(lab)  # an unknown lab is an error, not an empty list
    return repo.distros.trees(lab)


def import_tree(
    repo: Repository,
    caller: User,
    *,
    lab: str,
    treeinfo: bytes,
    base: str,
    now: datetime,
    sink: EventSink,
    name: str | None = None,
    tags: Iterable[str] = (),
    replace: bool = False,
) -> DistroTree:
    """Record the tree a ``.treeinfo`` describes, rooted at ``base`` (admins)."""
    require_admin(caller)
    _check_location(base, "url")
    source = base.rstrip("/") + "/.treeinfo"
    tree = read_treeinfo(
        treeinfo, source=source, base=base, lab=lab, now=now, name=name, tags=_tags(tags)
    )
    repo.distros.add(tree, actor=caller.name, replace=replace)
    sink.post(DistrosChanged(lab))
    return tree


def add_image(
    repo: Repository,
    caller: User,
    image: Image,
    *,
    now: datetime,
    sink: EventSink,
    replace: bool = False,
) -> DistroTree:
    """Record a tree given by its facts alone (admins)."""
    require_admin(caller)
    for place, value in (
        ("name", image.name),
        ("arch", image.arch),
        ("os_type", image.os_type),
        ("os_version", image.os_version),
    ):
        _check_word(value, place)
    for machine_type in image.machine_types:
        _check_word(machine_type, "machine_type")
    for place, value in (("kernel", image.kernel), ("initrd", image.initrd)):
        if value:
            _check_location(value, place)
    for repo_name, url in image.repos:
        _check_word(repo_name, "repo")
        _check_location(url, f"repo {repo_name}")
    kind = "tree" if image.kernel and image.initrd else "image"
    if bool(image.kernel) != bool(image.initrd):
        raise InputError("give both --kernel and --initrd, or neither", place="kernel")
    tree = DistroTree(
        lab=image.lab,
        name=image.name,
        arch=image.arch,
        family=image.family or family_for_os(image.os_type, image.os_version),
        version=image.os_version.removesuffix(".stream"),
        variant=image.variant,
        kind=kind,
        kernel=image.kernel,
        initrd=image.initrd,
        repos=image.repos,
        tags=_tags(image.tags),
        machine_types=image.machine_types,
        os_type=image.os_type,
        os_version=image.os_version,
        added_at=now,
    )
    repo.distros.add(tree, actor=caller.name, replace=replace)
    sink.post(DistrosChanged(image.lab))
    return tree


def remove_tree(
    repo: Repository,
    caller: User,
    lab: str,
    name: str,
    *,
    arch: str | None,
    now: datetime,
    sink: EventSink,
) -> list[DistroTree]:
    """Remove a lab's tree, for one arch or every arch (admins); returns what went."""
    require_admin(caller)
    gone = repo.distros.remove(lab, name, arch, now=now, actor=caller.name)
    sink.post(DistrosChanged(lab))
    return gone


def as_dict(tree: DistroTree) -> dict[str, object]:
    """A tree as JSON data (the API's and ``--json``'s shape)."""
    return {
        "lab": tree.lab,
        "name": tree.name,
        "arch": tree.arch,
        "family": tree.family,
        "version": tree.version,
        "variant": tree.variant,
        "kind": tree.kind,
        "url": tree.url,
        "kernel": tree.kernel,
        "initrd": tree.initrd,
        "repos": [{"name": n, "url": u} for n, u in tree.repos],
        "tags": sorted(tree.tags),
        "machine_types": sorted(tree.machine_types),
        "os_type": tree.os_type,
        "os_version": tree.os_version,
        "added_at": None if tree.added_at is None else tree.added_at.isoformat(),
    }


def _tags(tags: Iterable[str]) -> frozenset[str]:
    out = frozenset(tags)
    for tag in out:
        _check_word(tag, "tag")
    return out


def _check_word(value: str, place: str) -> None:
    if not _WORD.match(value) or len(value) > 255:
        raise InputError(
            f"{value!r} is not a name (letters, digits and . _ - + : @ ~)", place=place
        )


def _check_location(value: str, place: str) -> None:
    if not value.startswith(_URL_SCHEMES) or len(value) > 4096 or any(ord(c) < 32 for c in value):
        raise InputError(
            f"{value[:80]!r} is not a URL (http, https, ftp, nfs, file) or an absolute path",
            place=place,
        )
    if "@" in value.partition("://")[2].partition("/")[0]:
        # a tree's URLs are shown to everyone and handed to hooks: no credentials in them
        raise InputError("a URL with a user or password in it is refused", place=place)
