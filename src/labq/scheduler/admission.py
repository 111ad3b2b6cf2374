"""Who may start: running limits, rate-limit buckets and paused labs (seed 004's queue controls).

A set counts against the limits from the moment it is handed on to run
(``Start``: it goes ``waiting``, then ``installing``, ``running``) until it
finishes. A set that could start but finds no running slot keeps what it holds
and waits; when a slot opens, the queue order decides who goes next. A
rate-limit bucket that is full throttles its waiting sets: they take no
systems until one of the bucket's running sets ends.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from labq.scheduler.entries import SchedulerConfig, SetEntry


@dataclass
class Admission:
    """Counts of started sets per lab and per bucket, and the labs whose queue is paused."""

    config: SchedulerConfig
    running: Counter[str] = field(default_factory=Counter)  # lab -> started sets
    total: int = 0  # started sets in every lab
    in_buckets: Counter[str] = field(default_factory=Counter)  # bucket -> started sets
    members: dict[str, set[int]] = field(default_factory=dict)  # bucket -> waiting sets
    paused: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        # asked for every candidate of every offer: no limits at all is the common case
        self._lab_limits = dict(self.config.lab_running_limits)
        self._open = self.config.running_limit is None and not self._lab_limits

    def slot_free(self, lab: str) -> bool:
        """Whether a set may start in ``lab`` now: not paused, below both running limits."""
        if lab in self.paused:
            return False
        return self._open or self.slot_reason(lab) is None

    def pause(self, lab: str) -> None:
        """Nothing new starts in ``lab`` until it is resumed."""
        self.paused.add(lab)

    def resume(self, lab: str) -> bool:
        """Sets may start in ``lab`` again; whether it was paused."""
        if lab not in self.paused:
            return False
        self.paused.discard(lab)
        return True

    def join(self, entry: SetEntry) -> None:
        """A waiting set joins its buckets' waiting lists."""
        for bucket, _limit in entry.buckets:
            self.members.setdefault(bucket, set()).add(entry.id)

    def leave(self, entry: SetEntry) -> None:
        """A set stops waiting (it started, or finished without starting)."""
        for bucket, _limit in entry.buckets:
            self.members.get(bucket, set()).discard(entry.id)

    def started(self, entry: SetEntry, lab: str) -> set[str]:
        """Count a started set; the buckets whose waiting sets must be looked at again."""
        self.leave(entry)
        self.running[lab] += 1
        self.total += 1
        buckets = {bucket for bucket, _limit in entry.buckets}
        self.in_buckets.update(buckets)
        return buckets

    def finished(self, entry: SetEntry, lab: str) -> tuple[set[str], set[str] | None]:
        """Uncount a started set: (buckets to look at again, labs whose slots reopened).

        The labs are None when the global limit reopened (every lab may start again).
        """
        was_full = self.slot_reason(lab) is not None
        global_full = (
            self.config.running_limit is not None and self.total >= self.config.running_limit
        )
        self.running[lab] -= 1
        self.total -= 1
        buckets = {bucket for bucket, _limit in entry.buckets}
        self.in_buckets.subtract(buckets)
        if global_full:
            return buckets, None
        return buckets, ({lab} if was_full and lab not in self.paused else set())

    def throttle_of(self, entry: SetEntry) -> str | None:
        """Why a full bucket keeps this set from taking systems, or None."""
        for bucket, limit in entry.buckets:
            if self.in_buckets[bucket] >= limit:
                return f"rate limit {bucket}: {self.in_buckets[bucket]} of {limit} running"
        return None

    def slot_reason(self, lab: str) -> str | None:
        """What pause or running limit keeps a set from starting in ``lab`` now, or None."""
        if lab in self.paused:
            return f"the queue of {lab} is paused"
        limit = self.config.running_limit
        if limit is not None and self.total >= limit:
            return f"a running slot ({self.total} of {limit} sets running)"
        lab_limit = self._lab_limits.get(lab)
        if lab_limit is not None and self.running[lab] >= lab_limit:
            return f"a running slot in {lab} ({self.running[lab]} of {lab_limit} sets running)"
        return None
