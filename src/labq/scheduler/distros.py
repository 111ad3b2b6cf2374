"""Distro trees in the core: which labs carry a tree a recipe's distro requirement admits.

A recipe with a distro requirement is viable on a system only where the
system's lab carries a tree the requirement admits and that fits the system's
arch (and machine type, for an image made for some). That is part of the
recipe's viability class, so the index answers it once per class and system,
like the host requirements: the pending-system event looks nothing up.

:class:`~labq.scheduler.catalogue.Catalogue` (the index's) keeps each lab's
trees and, per lab, a memo of ``(requirement, arch, machine type) -> admitted``
that only a change of that lab's trees forgets.

:class:`Trees` is the part that takes a lab's new trees: it re-fits the
systems the change concerns and says which holders there can no longer
complete (the core gives their holds back).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from labq.domain.distro import DistroTree
from labq.scheduler.books import Books
from labq.scheduler.entries import SetEntry
from labq.scheduler.freshness import Freshness
from labq.scheduler.index import ClassIndex
from labq.scheduler.placement import Placer


class Trees:
    """The part that takes a lab's new trees and re-fits the systems they concern."""

    def __init__(self, books: Books, index: ClassIndex, placer: Placer, fresh: Freshness):
        self._books = books
        self._index = index
        self._placer = placer
        self._fresh = fresh

    def load(self, trees: Mapping[str, Iterable[DistroTree]]) -> None:
        """Before a restore: every lab's trees, with nothing to re-fit yet."""
        if self._books.systems:
            raise ValueError("trees are loaded into a fresh scheduler, before its systems")
        for lab, carried in sorted(trees.items()):
            self._index.catalogue.carry(lab, tuple(carried))

    def carry(self, lab: str, trees: Sequence[DistroTree]) -> list[tuple[SetEntry, str]]:
        """The lab's trees changed: re-fit, offer its free systems again, and say which
        holders can no longer complete (in rank order, with the reason)."""
        scope = self._index.catalogue.carry(lab, trees)
        if scope is None:
            return []
        refitted = self._index.refit(None if scope else lab)
        if not refitted:
            return []
        self._fresh.systems_changed()
        books = self._books
        # their idle systems are offered again (some waiting set may fit them now)
        books.reopen_labs({books.systems[fqdn].lab for fqdn in refitted})
        labs = sorted(books.holders) if scope else [lab]
        out = []
        for where in labs:
            for set_id in sorted(books.holders.get(where, ())):
                entry = books.sets[set_id]
                if not self._completes(entry, where):
                    reason = f"lab {where} no longer carries a distro tree the set needs"
                    out.append((entry, reason))
        return sorted(out, key=lambda pair: books.rank_of(pair[0]), reverse=True)

    def _completes(self, entry: SetEntry, lab: str) -> bool:
        """Whether what the holder holds still fits and the lab could still run it whole."""
        systems_of = self._index.systems_of
        if any(r.system not in systems_of[r.klass] for r in entry.placed()):
            return False
        return self._placer.could_run(lab, entry.demands(), entry.group)
