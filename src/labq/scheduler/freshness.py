"""What the core's caches may still use: one place counts what changed and keeps the memos.

The core remembers work between events — which systems a class may use, a
holder's reservation, a backfill search that found nothing, each waiting set's
place in the queue — and each result depends on a few things that change:

- the systems (added, a condition changed, taken by a person): every viability
  memo is forgotten;
- per lab, the holders (who holds, and what they could lend), the systems given
  or taken back, and the free-time profile;
- the backfill shelf (a set (re)joined it);
- per set, its place in the queue (its heap items go stale when it changes).

Parts say what changed with the verbs below and ask for the stamps; they keep
no counters of their own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

Stamp = tuple[Hashable, ...]  # what a remembered result depends on


class Stamped(Generic[K, V]):
    """Results kept with the stamp they were worked out under: stale once it differs."""

    def __init__(self) -> None:
        self._known: dict[K, tuple[Stamp, V]] = {}

    def get(self, key: K, stamp: Stamp) -> V | None:
        """The result remembered for ``key`` under this very stamp, if any."""
        known = self._known.get(key)
        return known[1] if known is not None and known[0] == stamp else None

    def put(self, key: K, stamp: Stamp, value: V) -> None:
        """Remember a result worked out under ``stamp``."""
        self._known[key] = (stamp, value)

    def forget(self, key: K) -> None:
        """Drop what is remembered for ``key``."""
        self._known.pop(key, None)


class Freshness:
    """The version counters and memos that decide what is stale, for every part of the core."""

    def __init__(self) -> None:
        self._systems = 0  # bumped whenever the set of usable systems may change
        self._holds: Counter[str] = Counter()  # lab -> when the backfill room may change
        self._placed: Counter[str] = Counter()  # lab -> whenever a system is given or taken
        self._profile: Counter[str] = Counter()  # lab -> whenever its free-time profile moves
        self._shelf = 0  # bumped on every push onto the backfill shelf
        self._places: dict[int, int] = {}  # set id -> version of its place in the queue
        self._viability: list[dict[Any, Any]] = []  # forgotten when systems change

    # --- what changed -------------------------------------------------------------

    def systems_changed(self) -> None:
        """A system was added, or changed condition or hands: forget every viability memo."""
        self._systems += 1
        for memo in self._viability:
            memo.clear()

    def holds_moved(self, lab: str) -> None:
        """The lab's holders, or what they hold, changed (the backfill room may differ)."""
        self._holds[lab] += 1

    def placed(self, lab: str) -> None:
        """A system of the lab was given to a recipe or taken back."""
        self._placed[lab] += 1

    def profile_moved(self, lab: str) -> None:
        """A set started or ended in the lab: its free-time profile changed."""
        self._profile[lab] += 1

    def shelf_grew(self) -> None:
        """A set (re)joined the backfill shelf: a search that found nothing may find it."""
        self._shelf += 1

    def reorder(self, set_id: int) -> None:
        """The set's place in the queue changed: its heap items are stale."""
        self._places[set_id] = self._places.get(set_id, 0) + 1

    # --- what to compare ----------------------------------------------------------

    @property
    def places(self) -> Mapping[int, int]:
        """Per set, the version of its place in the queue (heap items carry it; 0 if none)."""
        return self._places

    def reservation_stamp(self, lab: str, now: float, above: tuple[int, ...]) -> Stamp:
        """What a holder's reservation depends on, with ``above`` the higher-ranked holders:
        the lab's profile, the systems, the time and, when someone is above, who holds what."""
        placed = self._placed[lab] if above else -1
        return (self._profile[lab], self._systems, now, above, placed)

    def search_stamp(self, lab: str, now: float) -> Stamp:
        """What a backfill search's result depends on, but for the room (its window)."""
        return (self._shelf, self._profile[lab], self._holds[lab], self._systems, now)

    # --- memos --------------------------------------------------------------------

    def until_systems_change(self) -> dict[K, V]:
        """A memo forgotten whenever the systems change (viability, pools, runnability)."""
        memo: dict[K, V] = {}
        self._viability.append(memo)
        return memo

    def stamped(self) -> Stamped[K, V]:
        """A memo whose results are checked against a stamp when read."""
        return Stamped()
