"""Sets kept queued for a lock (seed 004): who holds what, and who was kept back first.

A started set takes its declared locks before anything else; one that finds
them held waits in its running slot. Where the predictive queue is on, the
core does not start a set whose declared locks certainly conflict with a lock
a running set holds or has asked for (:class:`HeldLocks`): the slot and the
systems go to work that can run, and the set starts once the lock is free.

A kept set stands in line for its locks (:class:`LockLine`), as it would at
the lock service, whose waiters are served first come, first served: a
lower-ranked set that would take a lock in a way that conflicts with what a
kept set waits for is kept back too, so a stream of later sets (readers
taking the lock shared) cannot keep the lock busy forever. :class:`Keeper` is
what the core consults.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from labq.domain.contention import LockNeeds
from labq.domain.locks import LockKind
from labq.domain.locktable import ALL, Blocker, Grant, declared_grants
from labq.scheduler.entries import SetEntry
from labq.scheduler.order import Rank
from labq.scheduler.predictive import RunningLocks

UNKNOWN = (LockKind.UNKNOWN_SHARED, LockKind.UNKNOWN_EXCLUSIVE)
EXCLUSIVE = (LockKind.EXCLUSIVE, LockKind.ALL_EXCLUSIVE)
SURE_NOT_TO_WAIT = 1.5  # the seed's cells below this mean "there should be no contention"


class HeldLocks:
    """The locks of running sets: what they hold, and what they declared (held or asked for)."""

    def __init__(self) -> None:
        self._of: dict[int, frozenset[Grant]] = {}
        # (level, name) -> owner -> exclusive; "*" stands for every name of its level
        self._on: dict[tuple[str, str], dict[int, bool]] = {}
        self._levels: dict[str, set[str]] = {}  # level -> names held there
        self.exclusive = 0  # exclusive locks held: none, and only named declarations can clash

    def __contains__(self, set_id: object) -> bool:
        return set_id in self._of

    def put(self, set_id: int, grants: Iterable[Grant]) -> bool:
        """Count (or recount) a running set's locks; whether any was let go."""
        new = frozenset(grants)
        old = self._of.get(set_id, frozenset())
        if set_id in self._of and new == old:
            return False
        self.remove(set_id)
        self._of[set_id] = new
        self.exclusive += sum(grant.exclusive for grant in new)
        for grant in new:  # a lock held both ways counts as exclusive
            owners = self._on.setdefault((grant.level, grant.name), {})
            owners[set_id] = owners.get(set_id, False) or grant.exclusive
            self._levels.setdefault(grant.level, set()).add(grant.name)
        return bool(old - new)

    def remove(self, set_id: int) -> bool:
        """A set stopped running; whether it held anything."""
        grants = self._of.pop(set_id, frozenset())
        self.exclusive -= sum(grant.exclusive for grant in grants)
        for grant in grants:
            owners = self._on.get((grant.level, grant.name))
            if owners is None:
                continue  # the same lock held both ways: already gone
            owners.pop(set_id, None)
            if not owners:
                del self._on[(grant.level, grant.name)]
                self._levels[grant.level].discard(grant.name)
        return bool(grants)

    def blocker(self, owner: int, wanted: Iterable[Grant]) -> Blocker | None:
        """The first running set (lowest id) holding a lock that conflicts with ``wanted``."""
        found: list[Blocker] = []
        for grant in wanted:
            names = self._levels.get(grant.level, set()) if grant.name == ALL else {grant.name, ALL}
            for name in sorted(names):
                for other, exclusive in self._on.get((grant.level, name), {}).items():
                    if other != owner and (exclusive or grant.exclusive):
                        found.append(Blocker(grant, other, Grant(grant.level, name, exclusive)))
        return min(found, key=lambda b: (b.owner, b.wanted), default=None)


class LockLine:
    """The sets kept queued for a lock, so that lower-ranked sets do not overtake them."""

    def __init__(self) -> None:
        self.kept: dict[int, tuple[Grant, ...]] = {}  # set -> the locks it would take
        self._on: dict[str, dict[int, None]] = {}  # level -> kept sets taking a lock there

    def __len__(self) -> int:
        return len(self.kept)

    def __contains__(self, set_id: object) -> bool:
        return set_id in self.kept

    def keep(self, set_id: int, grants: tuple[Grant, ...]) -> None:
        """The set could start now but would surely wait for one of these locks."""
        self.leave(set_id)
        self.kept[set_id] = grants
        for level in {grant.level for grant in grants}:
            self._on.setdefault(level, {})[set_id] = None

    def leave(self, set_id: int) -> bool:
        """The set is kept no more (it may start, it started, it ended); whether it was."""
        grants = self.kept.pop(set_id, None)
        if grants is None:
            return False
        for level in {grant.level for grant in grants}:
            self._on[level].pop(set_id, None)
        return True

    def ahead(
        self,
        set_id: int,
        needs: LockNeeds,
        grants: Iterable[Grant],
        before: Callable[[int], bool],
    ) -> tuple[int, Grant] | None:
        """A kept set ``before`` this one whose lock this one would take in its way.

        ``before(other)`` says whether ``other`` is ranked above this set and
        still kept (the core checks that it still waits). Returns the kept set
        and the lock it waits for. Only kept sets on the levels this one locks
        (or may lock: an unknown declaration) are looked at.
        """
        mine = tuple(grants)
        levels = {grant.level for grant in mine}
        levels.update(level for level, decl in needs.levels if decl.kind in UNKNOWN)
        seen: set[int] = set()
        for level in sorted(levels):
            for other in list(self._on.get(level, ())):
                if other == set_id or other in seen:
                    continue
                seen.add(other)
                lock = _in_way(needs, mine, self.kept[other])
                if lock is not None and before(other):
                    return other, lock
        return None


def _in_way(needs: LockNeeds, mine: tuple[Grant, ...], theirs: tuple[Grant, ...]) -> Grant | None:
    """Which of ``theirs`` this set's locks conflict with: by name, or by an unknown it may take.

    An unknown declaration names nothing, but its tasks may take any name of
    the level as they run; they would then overtake the kept set.
    """
    for grant in theirs:
        if any(grant.conflicts(g) for g in mine):
            return grant
        decl = needs.at(grant.level)
        if decl.kind in UNKNOWN and (grant.exclusive or decl.kind is LockKind.UNKNOWN_EXCLUSIVE):
            return grant
    return None


class Keeper:
    """Which waiting sets stay queued because they would only wait for a lock (issue 11).

    The core asks it before a set starts (:meth:`reason`), tells it what running
    sets lock (:meth:`count`, :meth:`uncount`) and when a set stops waiting
    (:meth:`left`), and offers idle systems again when :meth:`freed` lets sets go.
    """

    def __init__(
        self,
        sets: Mapping[int, SetEntry],
        rank_of: Callable[[SetEntry], Rank],
        running: RunningLocks,
        *,
        enabled: bool,
    ) -> None:
        self.sets = sets
        self.rank_of = rank_of
        self.running = running
        self.enabled = enabled  # off for labq-fifo, which starts sets as they come
        self.held = HeldLocks()
        self.line = LockLine()
        # kept until their lock was let go: they go first, while nothing takes it again
        self.due: dict[int, tuple[Grant, ...]] = {}  # set -> the locks it waited for

    # --- running sets -----------------------------------------------------------------

    def count(self, entry: SetEntry, lab: str, grants: Iterable[Grant]) -> bool:
        """A running set's locks: what it declared (it holds them, or waits for them ahead
        of anyone who starts later) and what it holds; whether it let go of one."""
        return self.held.put(entry.id, declared_grants(entry.locks, lab) + tuple(grants))

    def uncount(self, set_id: int) -> bool:
        """A set stopped running; whether it held anything."""
        return self.held.remove(set_id)

    # --- waiting sets -----------------------------------------------------------------

    def reason(self, entry: SetEntry, lab: str, *, keep: bool = False) -> str | None:
        """Why the set would surely wait for a lock if it started in ``lab`` now, or None.

        A lock a running set holds (or asked for first), or one a better-ranked
        kept set waits for. With ``keep`` a set found waiting for a running
        set's lock joins the line; any other answer takes it out.
        """
        if not self.enabled or entry.lab is not None:
            return None  # a holder is never kept: its systems would idle
        if not (entry.locks.declares or self.line or self.held.exclusive):
            return None  # nothing it would take can be in anyone's way (the common case)
        grants = declared_grants(entry.locks, lab)
        blocker = self.held.blocker(entry.id, grants)
        if blocker is not None:
            if keep:
                self.line.keep(entry.id, grants)
            return f"waits for lock {_named(blocker.held)} held by set {blocker.owner}"
        if keep:
            self.line.leave(entry.id)
        ahead = self.line.ahead(entry.id, entry.locks, grants, lambda o: self._before(o, entry))
        if ahead is None:
            return None
        other, lock = ahead
        return f"waits for lock {_named(lock)} after set {other}, which waits for it first"

    def still_kept(self, entry: SetEntry, lab: str) -> bool:
        """Whether a set in the line still waits: no need to look for systems for it."""
        return entry.id in self.line and self.reason(entry, lab, keep=True) is not None

    def left(self, entry: SetEntry) -> bool:
        """The set stopped waiting (started, ended, may not run); whether it was in line
        with others behind it, who may go now."""
        self.due.pop(entry.id, None)
        return self.line.leave(entry.id) and bool(self.line)

    def freed(self) -> tuple[list[int], bool]:
        """After a lock was let go: the kept sets whose lock is free leave the line, and go
        first (:meth:`weighs_nothing`), as the lock service would serve them next.

        Returns the sets that became due (to re-key) and whether any left the line.
        """
        due: list[int] = []
        gone = False
        for set_id, grants in sorted(self.line.kept.items()):
            if self.held.blocker(set_id, grants) is not None:
                continue
            gone = self.line.leave(set_id) or gone
            if self.sets[set_id].waiting and set_id not in self.due:
                self.due[set_id] = grants
                due.append(set_id)
        return due, gone

    def taken_again(self) -> list[int]:
        """After a set started: the due sets whose lock it took (a set served first, or one
        that needs none of their locks but the lab's) wait for it again and weigh as the
        table says; they are no longer due (to re-key)."""
        again = [i for i, grants in sorted(self.due.items()) if self.held.blocker(i, grants)]
        for set_id in again:
            del self.due[set_id]
        return again

    def weighs_nothing(self, entry: SetEntry) -> bool:
        """Whether the set goes first among its priority, when the seed's table gives it no
        chance of waiting (no cell of 1.5 or 3): it was kept until its lock was let go (the
        lock service would serve it next), or it takes an exclusive lock. Exclusive locks
        are where sets queue, and one lying idle while its users wait behind lock-free
        work (the seed's 0.5 for "future contention") makes everyone finish later."""
        levels = entry.locks.levels
        takes_exclusive = any(decl.kind in EXCLUSIVE for _, decl in levels)
        if entry.id not in self.due and not (self.enabled and takes_exclusive):
            return False
        return all(self.running.worst(level, decl) < SURE_NOT_TO_WAIT for level, decl in levels)

    def _before(self, other_id: int, entry: SetEntry) -> bool:
        """Whether a set in the line still waits there and is ranked above ``entry``."""
        other = self.sets[other_id]
        gone = not other.waiting or not other.eligible or other.lab is not None
        if gone or self.held.blocker(other_id, self.line.kept[other_id]) is None:
            self.line.leave(other_id)  # its lock is free: it competes by the queue order again
            return False
        return self.rank_of(other) > self.rank_of(entry)


def _named(grant: Grant) -> str:
    """A lock as people name it: ``storage:nfs1``, ``storage:*`` for every name."""
    return f"{grant.level}:{grant.name}"
