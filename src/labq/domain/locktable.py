"""Shared and exclusive locks on named resources: the rules of the lock service.

Pure and in memory: the simulator keeps one for its whole run, the service
loads the rows it needs into one per request and writes back what changed.

- A request is a list of locks taken all together or not at all, so the
  locks a set declares can never deadlock against each other's.
- Two locks conflict when they are on the same level, name the same resource
  (or one of them is ``*``, every resource of the level), belong to different
  owners and one of them is exclusive.
- Waiters are served first come, first served: a request that would overtake an
  earlier conflicting waiter waits behind it, so a stream of shared locks
  cannot starve an exclusive one. One owner (a set) may have several requests
  waiting side by side (its tasks on several systems); asking again for the
  same locks keeps the request's place.
- A wait that would close a cycle of owners waiting on each other (tasks
  taking locks one by one, in different orders) is refused instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from labq.domain.contention import LockNeeds
from labq.domain.locks import WHOLE_LAB, LockKind

ALL: Final = "*"  # the lock name that stands for every name on its level


@dataclass(frozen=True, order=True)
class Grant:
    """One lock: ``name`` on ``level``, shared or exclusive."""

    level: str
    name: str
    exclusive: bool = False

    def __str__(self) -> str:
        mode = "exclusive" if self.exclusive else "shared"
        return f"{self.level}:{self.name} ({mode})"

    def conflicts(self, other: Grant) -> bool:
        """Whether two owners could not hold these two at once."""
        if self.level != other.level or not (self.exclusive or other.exclusive):
            return False
        return self.name == other.name or ALL in (self.name, other.name)


def declared_grants(needs: LockNeeds, lab: str) -> tuple[Grant, ...]:
    """The locks a set takes before it is provisioned: what it declared by name, or all.

    Every set takes its lab's whole-lab lock shared (a whole-lab set takes it
    exclusive, so it waits for the lab's other sets and they for it). Unknown
    declarations name nothing: their locks are taken by the tasks as they run.
    """
    grants = {Grant(WHOLE_LAB, lab, exclusive=needs.whole_lab)}
    for level, decl in needs.levels:
        exclusive = decl.kind in (LockKind.EXCLUSIVE, LockKind.ALL_EXCLUSIVE)
        if decl.kind in (LockKind.SHARED, LockKind.EXCLUSIVE):
            grants.update(Grant(level, name, exclusive) for name in decl.names)
        elif decl.kind in (LockKind.ALL_SHARED, LockKind.ALL_EXCLUSIVE):
            grants.add(Grant(level, ALL, exclusive))
    return tuple(sorted(grants))


@dataclass(frozen=True)
class Blocker:
    """A lock that stands in a request's way, and who has it (or waits for it first)."""

    wanted: Grant
    owner: int
    held: Grant
    waiting: bool = False  # the owner only waits for it, ahead of the request

    def __str__(self) -> str:
        how = "waits first for" if self.waiting else "holds"
        return f"{self.wanted} — set {self.owner} {how} {self.held}"


@dataclass
class Request:
    """A waiting request: all of ``grants`` for ``owner``, since ``since``.

    ``ref`` is whatever the caller keeps it by (the store: its row id).
    """

    owner: int
    grants: tuple[Grant, ...]
    since: float
    ref: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Outcome:
    """What became of an acquire: granted, waiting behind ``blockers``, or refused."""

    granted: bool
    blockers: tuple[Blocker, ...] = ()
    refused: str | None = None  # a wait that would deadlock

    def describe(self) -> str:
        """For people: what it waits on."""
        if self.granted:
            return "granted"
        if self.refused:
            return self.refused
        return "waiting: " + "; ".join(str(b) for b in self.blockers)


@dataclass
class LockTable:
    """Held locks per owner and the waiters in arrival order."""

    held: dict[int, set[Grant]] = field(default_factory=dict)
    waiters: list[Request] = field(default_factory=list)

    def acquire(
        self, owner: int, grants: Sequence[Grant], now: float, *, wait: bool = True
    ) -> Outcome:
        """Take every lock of ``grants`` for ``owner`` now, or queue (or refuse) the request.

        Asking again for the same locks keeps the request's place in the queue.
        """
        asked = tuple(sorted(set(grants)))
        queued = self._request_of(owner, asked)
        blockers = self._blockers(owner, asked, ahead_of=queued)
        if not blockers:
            if queued is not None:
                self.waiters.remove(queued)
            self.held.setdefault(owner, set()).update(asked)
            return Outcome(True)
        if not wait:
            return Outcome(False, blockers)
        if queued is None:
            cycle = self._cycle(owner, {b.owner for b in blockers})
            if cycle:
                return Outcome(False, blockers, refused=cycle)
            self.waiters.append(Request(owner, asked, now))
        return Outcome(False, blockers)

    def release(self, owner: int, grants: Iterable[Grant] | None = None) -> list[Request]:
        """Let go of some of ``owner``'s locks (all, and its wait, when None); who got theirs."""
        mine = self.held.get(owner, set())
        if grants is None:
            mine.clear()
            self.waiters = [w for w in self.waiters if w.owner != owner]
        else:
            mine.difference_update(grants)
        if not mine:
            self.held.pop(owner, None)
        return self._serve()

    def waiting_on(self, owner: int) -> tuple[Blocker, ...]:
        """What a waiting owner waits for now, over all its requests (empty: it does not wait)."""
        found: set[Blocker] = set()
        for request in self.waiters:
            if request.owner == owner:
                found.update(self._blockers(owner, request.grants, ahead_of=request))
        return tuple(sorted(found, key=lambda b: (b.owner, b.held, b.wanted)))

    def holders(self) -> dict[int, tuple[Grant, ...]]:
        """Every owner's locks, sorted."""
        return {owner: tuple(sorted(grants)) for owner, grants in self.held.items() if grants}

    def _serve(self) -> list[Request]:
        """Grant waiters, oldest first, whose locks are free of holders and older waiters."""
        served = []
        for request in list(self.waiters):
            if not self._blockers(request.owner, request.grants, ahead_of=request):
                self.waiters.remove(request)
                self.held.setdefault(request.owner, set()).update(request.grants)
                served.append(request)
        return served

    def _blockers(
        self, owner: int, wanted: Sequence[Grant], *, ahead_of: Request | None
    ) -> tuple[Blocker, ...]:
        found: list[Blocker] = []
        mine = self.held.get(owner, set())
        for grant in wanted:
            if grant in mine:
                continue  # it has that one already
            for other, grants in self.held.items():
                if other != owner:
                    found.extend(Blocker(grant, other, h) for h in grants if grant.conflicts(h))
            for request in self.waiters:
                if request is ahead_of:
                    break
                if request.owner != owner:
                    found.extend(
                        Blocker(grant, request.owner, w, waiting=True)
                        for w in request.grants
                        if grant.conflicts(w)
                    )
        return tuple(sorted(set(found), key=lambda b: (b.owner, b.held, b.wanted)))

    def _request_of(self, owner: int, grants: tuple[Grant, ...]) -> Request | None:
        return next((w for w in self.waiters if w.owner == owner and w.grants == grants), None)

    def _cycle(self, owner: int, blocked_by: set[int]) -> str | None:
        """A plain-words cycle if ``owner`` waiting on ``blocked_by`` closes one, else None."""
        path: list[int] = []
        seen: set[int] = set()

        def reaches(current: int) -> bool:
            if current == owner:
                return True
            if current in seen:
                return False
            seen.add(current)
            path.append(current)
            for blocker in self.waiting_on(current):
                if reaches(blocker.owner):
                    return True
            path.pop()
            return False

        for first in sorted(blocked_by):
            path.clear()
            if reaches(first):
                chain = " → ".join(f"set {o}" for o in [owner, *path, owner])
                return f"refused: waiting would deadlock ({chain})"
        return None
