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


@dataclass(frozen=True)
class SetForecast:
    """When a set is expected to start and end, and the run-time prediction behind it.

    ``start`` and ``end`` are epoch seconds (None: the scheduler cannot say, e.g. the set
    waits for a dependency or no system could take it); a running set has its real start.
    ``basis`` names what the prediction came from: ``source`` (earlier runs of the same job
    or clone chain), ``work`` (the same task list and host requirements), ``owner``,
    ``group``, or ``max_time`` / ``default`` when nothing of the kind has run before.
    """

    set_id: int
    start: float | None
    end: float | None
    seconds: float  # the predicted run time
    spread: float  # how far runs of its kind stray from the prediction (seconds)
    runs: int  # earlier runs the prediction learned from
    median: float | None  # their median length (None: no earlier runs)
    basis: str
    running: bool = False
