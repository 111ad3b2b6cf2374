"""Breadth-first search over every order of events of a small lab, and liveness over its graph.

Points are deduplicated by their canonical key (:func:`.point.key`); the
frontier keeps each point pickled, so a successor is one ``pickle.loads`` and
one event. Breadth first, the first path found to a broken invariant is a
shortest one.

Liveness: a *quiescent* point is one where nothing runs and nothing is due at a
fresh instant (after the consistency pass). Every maximal path of sets ending
and time passing ends in one, and every such point is itself explored, so "from
every reachable state, letting running sets finish leads to every live set
starting" is checked as: no quiescent point has a waiting set that some lab
could run, and from every point a quiescent one is reached through *drain*
edges (ends and instants passing) within the horizon (:attr:`Result.drained`).
"""

from __future__ import annotations

import time
from collections import Counter, deque
from dataclasses import dataclass, field

from labq.scheduler import decisions as d
from labq.sim.explore.checks import Violation, check, holders, stuck
from labq.sim.explore.lab import Lab
from labq.sim.explore.point import (
    Context,
    Event,
    Point,
    apply,
    enabled,
    initial,
    key,
    pack,
    recorder,
    unpack,
)
from labq.sim.explore.recorder import Call

DRAIN = frozenset({"finish", "abort", "advance"})
Step = tuple[int, Event]  # (instant, event)


@dataclass(frozen=True)
class Finding:
    """A broken invariant and a shortest sequence of events that breaks it."""

    violation: Violation
    path: tuple[Step, ...]

    def __str__(self) -> str:
        steps = "; ".join(f"t={at} {event}" for at, event in self.path)
        return f"{self.violation}\n  after: {steps}"


@dataclass
class Result:
    """What one exploration saw."""

    lab: str
    states: int = 0
    transitions: int = 0
    seconds: float = 0.0
    quiescent: int = 0
    drained: int = 0  # points from which drain edges reach a quiescent point
    undrained: int = 0  # points up to the horizon from which they reach none (should be 0)
    complete: bool = True  # False: stopped at ``max_states`` or at the first finding
    findings: list[Finding] = field(default_factory=list)
    # decisions seen on new transitions, by kind (a release by the start of its reason):
    # what the lab exercised
    seen: Counter[str] = field(default_factory=Counter)

    @property
    def rate(self) -> float:
        """States per second."""
        return self.states / self.seconds if self.seconds else 0.0


def explore(lab: Lab, *, max_states: int | None = None, first: bool = False) -> Result:
    """Explore every order of events of ``lab`` (up to ``max_states`` points).

    ``first``: stop at the first broken invariant. Otherwise every rule's first
    (shortest) counterexample is kept.
    """
    began = time.perf_counter()
    root, context = initial(lab)
    result = Result(lab.name)
    parents: list[tuple[int, int, Event] | None] = [None]  # id -> (parent, its instant, event)
    # keys by their hash: a point's key is a few kilobytes, and two keys of different
    # points sharing a 64-bit hash in a million points has odds below 1e-7
    seen: dict[int, int] = {hash(key(root, context)): 0}
    drains: list[list[int]] = [[]]
    instants = [0]
    quiet: list[int] = []
    rules: set[str] = set()
    frontier: deque[tuple[int, bytes]] = deque([(0, _pack(root))])
    while frontier:
        parent_id, blob = frontier.popleft()
        base = unpack(blob)
        before, instant = holders(base), base.now
        events = enabled(base, context)
        for index, event in enumerate(events):
            point = base if index == len(events) - 1 else unpack(blob)
            apply(point, event, context)
            result.transitions += 1
            found = seen.get(k := hash(key(point, context)))
            if found is None:
                found = seen[k] = len(parents)
                parents.append((parent_id, instant, event))
                drains.append([])
                instants.append(point.now)
                result.seen.update(_kinds(recorder(point.world).log))
                broken = check(before, point, context)
                if event.what == "advance":
                    quiescent = not point.world.running() and not _due(point, lab)
                    if quiescent:
                        quiet.append(found)
                        broken += stuck(point, context)
                for violation in broken:
                    if violation.rule not in rules:
                        rules.add(violation.rule)
                        path = _path(parents, found)
                        result.findings.append(Finding(violation, path))
                if broken and first:
                    result.complete = False
                    frontier.clear()
                    break
                if point.error is None:
                    frontier.append((found, _pack(point)))
                if max_states is not None and len(parents) >= max_states:
                    result.complete = False
                    frontier.clear()
                    break
            if event.what in DRAIN:
                drains[parent_id].append(found)
    result.states = len(parents)
    result.quiescent = len(quiet)
    reached = _drained(drains, quiet)
    result.drained = len(reached)
    result.undrained = sum(
        1 for node, at in enumerate(instants) if at <= lab.horizon and node not in reached
    )
    result.seconds = time.perf_counter() - began
    return result


def check_path(lab: Lab, path: tuple[Step, ...]) -> list[Finding]:
    """Run a path again, checking every invariant after each event: what it breaks first."""
    point, context = initial(lab)
    for index, (_, event) in enumerate(path):
        before = holders(point)
        apply(point, event, context)
        broken = check(before, point, context)
        if event.what == "advance" and not point.world.running() and not _due(point, lab):
            broken += stuck(point, context)
        if broken:
            return [Finding(violation, path[: index + 1]) for violation in broken]
    return []


def replay(lab: Lab, path: tuple[Step, ...]) -> tuple[Point, Context, list[Call]]:
    """Run a path again from the start: the point it ends at and every call to the core."""
    point, context = initial(lab)
    calls = list(recorder(point.world).log)
    for _, event in path:
        apply(point, event, context)
        calls += recorder(point.world).log
        if point.error is not None:
            break
    return point, context, calls


def _kinds(calls: list[Call]) -> list[str]:
    out = []
    for _, _, _, decisions in calls:
        for decision in decisions:
            name = type(decision).__name__
            if isinstance(decision, d.Release):
                name += ": " + " ".join(decision.reason.split()[:2])
            out.append(name)
    return out


def _due(point: Point, lab: Lab) -> bool:
    return any(t <= lab.end for t, *_ in point.world._heap)


def _path(parents: list[tuple[int, int, Event] | None], node: int) -> tuple[Step, ...]:
    steps: list[Step] = []
    link = parents[node]
    while link is not None:
        parent, at, event = link
        steps.append((at, event))
        link = parents[parent]
    return tuple(reversed(steps))


def _drained(drains: list[list[int]], quiet: list[int]) -> set[int]:
    """The points that reach a quiescent point through drain edges (a reverse search)."""
    back: list[list[int]] = [[] for _ in drains]
    for source, targets in enumerate(drains):
        for target in targets:
            back[target].append(source)
    reached = set(quiet)
    todo = list(quiet)
    while todo:
        for source in back[todo.pop()]:
            if source not in reached:
                reached.add(source)
                todo.append(source)
    return reached


def _pack(point: Point) -> bytes:
    recorder(point.world).log.clear()
    return pack(point)
