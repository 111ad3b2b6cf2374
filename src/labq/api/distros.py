"""``/distros``: each lab's distro trees; list (everyone), import, add, remove (admins).

The server never fetches a tree: ``labq distro import`` reads the ``.treeinfo``
(from a URL or a directory) and sends its text with the tree's location.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import Field

from labq.api.openapi import answers
from labq.formats.treeinfo import MAX_BYTES
from labq.gateway.deps import AdminDep, StateDep, UserDep
from labq.gateway.posting import committing
from labq.gateway.schemas import NO_NUL, Body, Name
from labq.store import reading
from labq.usecases import distros
from labq.usecases.distros import Image

router = APIRouter(prefix="/distros", tags=["distros"])

Location = Annotated[str, Field(min_length=1, max_length=4096), NO_NUL]


class ImportBody(Body):
    """A ``.treeinfo`` as read from the tree at ``url`` (a URL or an absolute path)."""

    lab: Name
    url: Location
    treeinfo: Annotated[str, Field(max_length=MAX_BYTES), NO_NUL]
    name: Name | None = None
    tags: Annotated[list[Name], Field(max_length=64, default_factory=list)]
    replace: bool = False


class RepoBody(Body):
    """One repository of a tree."""

    name: Name
    url: Location


class ImageBody(Body):
    """A tree without a ``.treeinfo``: a Teuthology-style image, or kernel and initrd."""

    lab: Name
    name: Name
    arch: Name
    os_type: Name
    os_version: Name
    machine_types: Annotated[list[Name], Field(max_length=256, default_factory=list)]
    family: Name | None = None
    variant: Name | None = None
    kernel: Location | None = None
    initrd: Location | None = None
    repos: Annotated[list[RepoBody], Field(max_length=64, default_factory=list)]
    tags: Annotated[list[Name], Field(max_length=64, default_factory=list)]
    replace: bool = False


@router.get("", responses=answers(404))
def list_distros(state: StateDep, _: UserDep, lab: str | None = None) -> dict[str, Any]:
    """Every lab's trees (or one lab's), by lab, name and arch."""
    with reading(state.engine) as repo:
        trees = distros.list_trees(repo, lab)
    return {"trees": [distros.as_dict(t) for t in trees]}


@router.post("/import", status_code=201, responses=answers(404, 409))
def import_distro(body: ImportBody, state: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Record the tree a ``.treeinfo`` describes (admins)."""
    with committing(state) as (repo, sink):
        tree = distros.import_tree(
            repo,
            admin,
            lab=body.lab,
            treeinfo=body.treeinfo.encode(),
            base=body.url,
            name=body.name,
            tags=body.tags,
            replace=body.replace,
            now=state.clock(),
            sink=sink,
        )
    return distros.as_dict(tree)


@router.post("", status_code=201, responses=answers(404, 409))
def add_distro(body: ImageBody, state: StateDep, admin: AdminDep) -> dict[str, Any]:
    """Record a tree given by its facts (admins)."""
    image = Image(
        lab=body.lab,
        name=body.name,
        arch=body.arch,
        os_type=body.os_type,
        os_version=body.os_version,
        machine_types=frozenset(body.machine_types),
        family=body.family or "",
        variant=body.variant or "",
        kernel=body.kernel or "",
        initrd=body.initrd or "",
        repos=tuple((r.name, r.url) for r in body.repos),
        tags=frozenset(body.tags),
    )
    with committing(state) as (repo, sink):
        tree = distros.add_image(
            repo, admin, image, replace=body.replace, now=state.clock(), sink=sink
        )
    return distros.as_dict(tree)


@router.delete("/{lab}/{name}", responses=answers(404))
def remove_distro(
    lab: str, name: str, state: StateDep, admin: AdminDep, arch: str | None = None
) -> dict[str, Any]:
    """Remove a lab's tree, for one arch or for every arch (admins)."""
    with committing(state) as (repo, sink):
        gone = distros.remove_tree(repo, admin, lab, name, arch=arch, now=state.clock(), sink=sink)
    return {"removed": [distros.as_dict(t) for t in gone]}
