"""The queue as the scheduler sees it: one row per waiting set, in scheduling order."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QueueRow:
    """One queued recipe set in scheduling order, with the reason for its place."""

    set_id: int
    job_id: int
    position: int
    effective: str | None  # the effective priority's label; None: no pool open to it
    nominal: str
    age_s: float
    hold: str  # "none", or how it holds systems ("holding 2 of 3 in lab1", …)
    lab: str | None
    spv: float = 1.0  # static predictive value (seed 004)
    weight: float = 0.0  # spv after aging; lower goes first among equal priorities
    age_ticks: int = 0  # age in queue ticks (``queue.tick`` seconds each)
    waits_for: str | None = None  # what makes it ineligible now (a dependency, a filter, …)
    reason: str = ""  # what it waits for in plain words, never empty (waits_for, or systems)
    state: str = "queued"  # its least advanced recipe's state
    labs: tuple[str, ...] = ()  # where systems matching its recipes are (not yet placed)
