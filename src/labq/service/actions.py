"""What the scheduler service does after a commit: the dispatcher's orders.

The core's decisions are committed first; these are what then must happen
outside the database. None of them may be acted on before the commit.
"""

from __future__ import annotations

from dataclasses import dataclass

from labq.scheduler import decisions as d


@dataclass(frozen=True)
class Launch:
    """Run a started set: a supervisor carrying ``claim`` (the only one that may run it)."""

    set: int
    claim: str


@dataclass(frozen=True)
class Kill:
    """Kill a supervisor that stopped heart-beating; its end is then reported as any other."""

    set: int


@dataclass(frozen=True)
class EndKept:
    """The reservation of VM slot ``system`` ended: destroy the VM its ``<reservesys>``
    kept (before any set launched on the slot makes a new one: the quota holds)."""

    system: str


Action = Launch | Kill | EndKept | d.Stop
Actions = list[Action]
