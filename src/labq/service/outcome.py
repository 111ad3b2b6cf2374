"""What a handler of an event returns for the scheduler loop to apply.

A handler never sets the service's fields: it returns the actions to take after
the commit, a fresh core when it rebuilt one, and when the service's timer must
wake next when it read that again. The loop applies the outcome.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from labq.scheduler.core import Scheduler
from labq.service.actions import Actions


@dataclass(frozen=True)
class Wake:
    """When the scheduler thread must wake next (a pause or a reservation runs out);
    ``at`` None: nothing runs out."""

    at: datetime | None


@dataclass(frozen=True)
class Outcome:
    """What the loop applies after one handler."""

    actions: Actions = field(default_factory=list)  # after the commit: launches, stops, kills
    core: Scheduler | None = None  # a fresh core, rebuilt from the database, replaces the old
    wake: Wake | None = None  # the timer's new time; None: the timer stands
