"""The distro trees each lab carries, and which requirements they admit, memoised per lab.

The rule applies once some lab carries a tree: with an empty catalogue
everywhere (a fresh install, labq before trees) requirements are not checked,
as before (docs/scheduling.md, "Distro trees").
"""

from __future__ import annotations

from collections.abc import Sequence

from labq.domain.distro import DistroRequirement, DistroTree
from labq.scheduler.entries import SystemEntry

Fit = tuple[str, str, str | None]  # (requirement key, arch, machine type)


def _machine_type(system: SystemEntry) -> str | None:
    value = system.facts.get("machine_type")
    return None if value in (None, "") else str(value)


class Catalogue:
    """Per lab, the distro trees it carries, and which requirements they admit (memoised)."""

    def __init__(self) -> None:
        self._trees: dict[str, tuple[DistroTree, ...]] = {}
        self._carrying: set[str] = set()  # labs with at least one tree
        self._memo: dict[str, dict[Fit, bool]] = {}  # lab -> fit -> admitted
        self._gone: dict[tuple[str, str, str], DistroTree] = {}  # removed while the core ran

    @property
    def active(self) -> bool:
        """Whether distro requirements are checked at all (some lab carries a tree)."""
        return bool(self._carrying)

    def trees(self, lab: str) -> tuple[DistroTree, ...]:
        """The lab's trees."""
        return self._trees.get(lab, ())

    def carry(self, lab: str, trees: Sequence[DistroTree]) -> bool | None:
        """The lab now carries exactly ``trees``. None when nothing changed; else whether
        the change concerns every lab (the rule switched on or off) rather than this one."""
        old = self._trees.get(lab, ())
        if set(old) == set(trees):
            return None
        was = self.active
        for tree in set(old) - set(trees):
            self._gone[tree.key] = tree
        for tree in trees:
            self._gone.pop(tree.key, None)
        self._trees[lab] = tuple(trees)
        if trees:
            self._carrying.add(lab)
        else:
            self._carrying.discard(lab)
        self._memo.pop(lab, None)
        return was != self.active

    def serves(self, system: SystemEntry, distro: DistroRequirement | None) -> bool:
        """Whether the system's lab carries a tree for it that ``distro`` admits (always,
        without a requirement or while no lab carries any tree)."""
        if distro is None or not self._carrying:
            return True
        arch = str(system.facts.get("arch", ""))
        machine = _machine_type(system)
        memo = self._memo.setdefault(system.lab, {})
        fit = (distro.key, arch, machine)
        known = memo.get(fit)
        if known is None:
            known = memo[fit] = any(
                t.fits(arch, machine) and distro.admits(t) for t in self._trees.get(system.lab, ())
            )
        return known

    def removed(self, distro: DistroRequirement) -> bool:
        """Whether a tree the requirement admits was removed from a lab while the core ran."""
        return any(distro.admits(t) for t in self._gone.values())

    def why_not(self, distro: DistroRequirement) -> str:
        """Why no lab serves the requirement, in plain words (for an abort)."""
        gone = " (the tree was removed)" if self.removed(distro) else ""
        return f"no lab carries a distro tree for {distro.describe()}{gone}"
