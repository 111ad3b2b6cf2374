"""Each lab's distro catalogue: rows of ``distro_trees``, one per (lab, name, arch)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, delete, insert, select

from labq.domain.distro import DistroTree
from labq.errors import ConflictError, NotFoundError
from labq.store.base import Db
from labq.store.tables import DistroTrees, Labs


class DistroStore:
    """Adding, listing and removing the trees of each lab."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def trees(self, lab: str | None = None) -> list[DistroTree]:
        """The trees of one lab, or of every lab; by lab, name and arch."""
        stmt = (
            select(Labs.name, *_COLUMNS)
            .join(Labs, Labs.id == DistroTrees.lab_id)
            .order_by(Labs.name, DistroTrees.name, DistroTrees.arch)
        )
        if lab is not None:
            stmt = stmt.where(Labs.name == lab)
        return [_tree(row) for row in self.conn.execute(stmt)]

    def labs_with_trees(self) -> list[str]:
        """The labs whose catalogue holds at least one tree."""
        stmt = (
            select(Labs.name).join(DistroTrees, DistroTrees.lab_id == Labs.id).distinct()
        ).order_by(Labs.name)
        return list(self.conn.execute(stmt).scalars())

    def add(self, tree: DistroTree, *, actor: str = "admin", replace: bool = False) -> DistroTree:
        """Record a tree (its ``added_at`` is required); ``replace`` overwrites a tree of the
        same lab, name and arch, else such a tree is a conflict."""
        if tree.added_at is None:
            raise ValueError("a tree is added at a time")
        with self.db.atomic():
            lab_id = self.db.lab_id(tree.lab)
            same = (
                DistroTrees.lab_id == lab_id,
                DistroTrees.name == tree.name,
                DistroTrees.arch == tree.arch,
            )
            found = self.conn.execute(select(DistroTrees.id).where(*same)).first()
            if found is not None and not replace:
                raise ConflictError(
                    f"lab {tree.lab!r} already has a tree {tree.name!r} for {tree.arch}"
                )
            if found is not None:
                self.conn.execute(delete(DistroTrees).where(*same))
            self.conn.execute(insert(DistroTrees).values(lab_id=lab_id, **_values(tree)))
            self.db.log(tree.added_at, actor, "distro", "add", name=_label(tree), new=tree.url)
        return tree

    def remove(
        self, lab: str, name: str, arch: str | None = None, *, now: datetime, actor: str = "admin"
    ) -> list[DistroTree]:
        """Remove a lab's tree of that name (for one arch, or for every arch); returns what
        was removed, and raises NotFoundError when nothing was."""
        with self.db.atomic():
            gone = [t for t in self.trees(lab) if t.name == name and arch in (None, t.arch)]
            if not gone:
                which = f"{name!r} for {arch}" if arch else repr(name)
                raise NotFoundError(f"lab {lab!r} has no tree {which}")
            lab_id = self.db.lab_id(lab)
            where = [DistroTrees.lab_id == lab_id, DistroTrees.name == name]
            if arch is not None:
                where.append(DistroTrees.arch == arch)
            self.conn.execute(delete(DistroTrees).where(*where))
            for tree in gone:
                self.db.log(now, actor, "distro", "remove", name=_label(tree))
        return gone


_COLUMNS: Sequence[Any] = (
    DistroTrees.name,
    DistroTrees.arch,
    DistroTrees.family,
    DistroTrees.version,
    DistroTrees.variant,
    DistroTrees.kind,
    DistroTrees.url,
    DistroTrees.kernel,
    DistroTrees.initrd,
    DistroTrees.repos,
    DistroTrees.tags,
    DistroTrees.machine_types,
    DistroTrees.os_type,
    DistroTrees.os_version,
    DistroTrees.added_at,
)


def _tree(row: Row[Any]) -> DistroTree:
    values = dict(zip(("lab", *_NAMES), row, strict=True))
    values["repos"] = tuple((str(n), str(u)) for n, u in values["repos"])
    values["tags"] = frozenset(values["tags"])
    values["machine_types"] = frozenset(values["machine_types"])
    return DistroTree(**values)


_NAMES: Sequence[str] = tuple(c.key for c in _COLUMNS)


def _values(tree: DistroTree) -> dict[str, Any]:
    return {
        "name": tree.name,
        "arch": tree.arch,
        "family": tree.family,
        "version": tree.version,
        "variant": tree.variant,
        "kind": tree.kind,
        "url": tree.url,
        "kernel": tree.kernel,
        "initrd": tree.initrd,
        "repos": [list(r) for r in tree.repos],
        "tags": sorted(tree.tags),
        "machine_types": sorted(tree.machine_types),
        "os_type": tree.os_type,
        "os_version": tree.os_version,
        "added_at": tree.added_at,
    }


def _label(tree: DistroTree) -> str:
    return f"{tree.lab}/{tree.name}/{tree.arch}"
