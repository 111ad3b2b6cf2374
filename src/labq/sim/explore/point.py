"""One reachable state of a small lab, the events that may come next, and its canonical key.

Time is whole instants. Within an instant the world's events come in the order
``labq sim`` gives events of one time (docs/simulation.md § How a run goes):
sets ending, condition changes, cancels and priority changes, submissions (in
the scenario's job order), retries; the consistency pass closes the instant.
So every path is a run of a scenario file (:mod:`.writer`), and an order the
simulator cannot produce at one instant is explored with an instant between.
"""

from __future__ import annotations

import copyreg
import io
import math
import pickle
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from labq.domain.states import Condition
from labq.scheduler.view import SchedulerView
from labq.sim import world as w
from labq.sim.explore.lab import Lab
from labq.sim.explore.recorder import Recorder
from labq.sim.runner import access_policy, build_world, handle, scenario_event
from labq.sim.scenario import SimEvent
from labq.sim.world import World


class Event(NamedTuple):
    """Something the world does: ``submit``/``finish``/``abort``/``cancel``/``priority`` a job,
    ``condition`` of a system, ``distros`` of a lab (the lab's change of that index), or
    ``advance`` to the next instant."""

    what: str
    target: str = ""
    value: str = ""

    def __str__(self) -> str:
        return " ".join(p for p in (self.what, self.target, self.value) if p)

    @classmethod
    def parse(cls, text: str) -> Event:
        """The event :meth:`__str__` wrote."""
        what, *rest = text.split()
        return cls(what, *rest)


# The order of kinds within one instant, as the simulator's heap has them.
KIND = {
    "finish": w.FINISH,
    "abort": w.FINISH,
    "condition": w.CONDITION,
    "cancel": w.CONTROL,
    "priority": w.CONTROL,
    "distros": w.CONTROL,
    "submit": w.SUBMIT,
}
START: tuple[int, int] = (-1, 0)  # the floor of a fresh instant: anything may come


@dataclass
class Point:
    """A world at some instant, the last event of the instant, and the one-off events used."""

    world: World
    floor: tuple[int, int] = START  # (kind, order) of the last event at this instant
    used: frozenset[str] = frozenset()
    error: str | None = None  # the world or the core raised: a bug in itself

    @property
    def core(self) -> SchedulerView:
        """The scheduling core of this world, to read."""
        return recorder(self.world).core

    @property
    def now(self) -> int:
        """The instant."""
        return int(self.world.now)

    def copy(self) -> Point:
        """An independent copy (the world and core are plain objects: pickling is fastest)."""
        return unpack(pack(self))


def pack(point: Point) -> bytes:
    """The point pickled (counters as plain items: rebuilding one through ``update`` is slow)."""
    world = point.world
    world.ledger.history.rows.clear()  # the explorer reads no history: lighter pickles
    world.locking.history.clear()
    out = io.BytesIO()
    pickler = pickle.Pickler(out, pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _DISPATCH
    pickler.dump(point)
    return out.getvalue()


def unpack(blob: bytes) -> Point:
    """A point from :func:`pack`."""
    point = pickle.loads(blob)  # noqa: S301 - our own pickles
    assert isinstance(point, Point)
    return point


def _counter(counter: Counter[Any]) -> tuple[Any, ...]:
    return (copyreg.__newobj__, (Counter,), None, None, iter(dict(counter).items()))  # type: ignore[attr-defined]


_DISPATCH = {**copyreg.dispatch_table, Counter: _counter}


@dataclass
class Context:
    """What every point of one exploration shares."""

    lab: Lab
    job_sets: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def set_of(self, job: str) -> int:
        """The job's first set (its retry, if any, runs on its own)."""
        return self.job_sets[job][0]


def recorder(world: World) -> Recorder:
    """The recording policy of an explored world."""
    policy = world.policy
    assert isinstance(policy, Recorder)
    return policy


def initial(lab: Lab) -> tuple[Point, Context]:
    """The lab at instant 0 with its systems added and no job submitted."""
    scenario = lab.parsed()
    core = lab.core(scenario.config.scheduler(), access_policy(scenario))
    world, job_sets = build_world(scenario, {}, Recorder(core))
    return Point(world), Context(lab, job_sets)


def enabled(point: Point, context: Context) -> list[Event]:
    """Every event that may happen next, in a fixed order."""
    world, lab, now = point.world, context.lab, point.now
    out: list[Event] = []
    for job in lab.jobs:
        run = world.sets[context.set_of(job)]
        if run.started_at is None or run.finished_at is not None or run.stopping:
            continue
        seq = _finish_seq(world, run.id)
        began = world.locking.sets.get(run.id)
        if seq is None or began is None or began.run_start is None or began.run_start >= now:
            continue  # still waiting for its locks, or began this instant
        if (w.FINISH, seq) >= point.floor:
            out.append(Event("finish", job))
            if job in lab.aborts:
                out.append(Event("abort", job))
    if now > lab.horizon:  # the users and admins have stopped: sets end, time passes
        return out + ([Event("advance")] if now < lab.end else [])
    if point.floor <= (w.CONDITION, 0):
        for i, (fqdn, condition) in enumerate(lab.conditions):
            if (
                f"condition{i}" not in point.used
                and world.ledger.systems[fqdn].condition is not condition
            ):
                out.append(Event("condition", fqdn, condition.value))
    if point.floor <= (w.CONTROL, 0):
        for job in lab.cancels:
            if f"cancel {job}" not in point.used and _live(world, context, job):
                out.append(Event("cancel", job))
        for job, priority in lab.priorities:
            if f"priority {job}" not in point.used and _live(world, context, job):
                out.append(Event("priority", job, priority.name.lower()))
        for i, (where, _) in enumerate(lab.distros):
            if f"distros{i}" not in point.used:
                out.append(Event("distros", where, str(i)))
    for index, job in enumerate(lab.jobs):
        if context.set_of(job) not in world.submitted and (w.SUBMIT, index) >= point.floor:
            out.append(Event("submit", job))
    out.append(Event("advance"))
    return out


def apply(point: Point, event: Event, context: Context) -> None:
    """Let the event happen (in place); an exception of the world or core is kept as ``error``."""
    recorder(point.world).log.clear()
    try:
        _apply(point, event, context)
    except Exception as exc:
        point.error = f"{type(exc).__name__}: {exc}"


def _apply(point: Point, event: Event, context: Context) -> None:
    world, lab = point.world, context.lab
    if event.what == "advance":
        _pump(world, (w.CONSISTENCY, 0))
        if world.now >= 1:  # the simulator's pass comes every second from t = 1
            world.apply(world.policy.consistency_pass(world.now))
        world.now += 1
        point.floor = START
        return
    kind = KIND[event.what]
    order = 0
    if event.what in ("finish", "abort"):
        run = world.sets[context.set_of(event.target)]
        order = _finish_seq(world, run.id) or 0
    elif event.what == "submit":
        order = lab.jobs.index(event.target)
    _pump(world, (kind, order))
    point.floor = (kind, order)
    if event.what == "submit":
        for set_id in context.job_sets[event.target]:
            world.sets[set_id].submitted = world.now  # as the scenario's ``submit_at``
        world.submit(context.job_sets[event.target])
    elif event.what in ("finish", "abort"):
        _end(world, context.set_of(event.target), aborted=event.what == "abort")
    elif event.what == "condition":
        index = next(i for i, (f, c) in enumerate(lab.conditions) if (f, c.value) == event[1:])
        point.used |= {f"condition{index}"}
        world.set_condition(event.target, Condition(event.value))
    elif event.what == "distros":
        point.used |= {f"distros{event.value}"}
        trees = lab.distros[int(event.value)][1]
        change = {"at": world.now, "lab": event.target, "distros": [dict(t) for t in trees]}
        scenario_event(world, SimEvent.model_validate(change))
    elif event.what == "cancel":
        point.used |= {f"cancel {event.target}"}
        scenario_event(world, SimEvent(at=world.now, cancel=event.target))
    else:
        point.used |= {f"priority {event.target}"}
        scenario_event(world, SimEvent(at=world.now, job=event.target, priority=event.value))


def _end(world: World, set_id: int, *, aborted: bool) -> None:
    """The set's recipes all end now: it ran this long; aborted on its first recipe's system."""
    run = world.sets[set_id]
    began = world.locking.sets[set_id].run_start
    assert began is not None
    for i, recipe in enumerate(run.recipes):
        recipe.duration = world.now - began
        recipe.outcome = [recipe.system] if aborted and i == 0 else "pass"
    world.finish_set(set_id, run.finish_token)


def _finish_seq(world: World, set_id: int) -> int | None:
    """Where the set's end sits among the ends of this instant (the simulator's sequence)."""
    token = world.sets[set_id].finish_token
    for _, kind, seq, payload in world._heap:
        if kind == w.FINISH and payload[0] == set_id and payload[1] == token:
            return seq
    return None


def _pump(world: World, before: tuple[int, int]) -> None:
    """Carry out the world's own events of this instant that come before ``before``."""
    heap = world._heap
    while heap:
        time, kind, seq, _ = heap[0]
        if time > world.now or (kind, seq if kind == w.FINISH else math.inf) >= before:
            break
        popped = world.pop()
        assert popped is not None
        handle(world, popped[1], popped[2])


def _live(world: World, context: Context, job: str) -> bool:
    ids = world.jobs.get(job, [])
    return context.set_of(job) in world.submitted and any(
        world.sets[i].finished_at is None for i in ids
    )


def key(point: Point, context: Context) -> Hashable:
    """What the future of the point depends on, without sequence numbers or caches.

    Two points with the same key behave alike: the world's sets, recipes and
    systems, the core's view of them (holds, holders, free systems, spv), the
    world's pending events up to the last instant, the keeper's line and due sets
    (issue 11), and the instant's floor.
    """
    world = point.world
    core: SchedulerView = recorder(world).core
    horizon = context.lab.end
    finishing = []
    for time, kind, _seq, payload in sorted(world._heap):
        if time > horizon:
            continue
        if kind == w.FINISH:
            stale = world.sets[payload[0]].finish_token != payload[1]
            finishing.append((time, kind, payload[0], stale, payload[2:]))
        else:
            finishing.append((time, kind, _plain(payload), False, ()))
    floor: Hashable = point.floor
    if point.floor[0] == w.FINISH:  # who may still end this instant
        floor = (
            w.FINISH,
            tuple(sorted(s for s in world.sets if (_finish_seq(world, s) or -1) > point.floor[1])),
        )
    sets = tuple(
        (
            run.id,
            run.id in world.submitted,
            run.started_at,
            run.finished_at is None,
            run.priority,
            run.error is not None,
            run.stopping,
            tuple((r.state, r.system, r.excluded, r.duration) for r in run.recipes),
        )
        for run in world.sets.values()
    )
    entries = tuple(
        (
            e.id,
            e.lab,
            e.held_since,
            e.started_at,
            e.finished,
            e.priority,
            e.spv,
            e.throttle,
            tuple((r.state, r.system) for r in e.recipes),
        )
        for e in core.sets.values()
    )
    systems = tuple(
        (f, s.condition, s.recipe, world.ledger.systems[f].usage) for f, s in core.systems.items()
    )
    holders = tuple((lab, tuple(sorted(ids))) for lab, ids in sorted(core.holders.items()))
    free = tuple((lab, tuple(sorted(f))) for lab, f in sorted(core.free.items()))
    keeper = core.kept_for_locks()  # due by id, in line in order
    trees = tuple(
        (lab, tuple(sorted(t.key for t in carried))) for lab, carried in sorted(world.trees.items())
    )
    return (
        point.now,
        floor,
        point.used,
        point.error,
        tuple(finishing),
        sets,
        entries,
        systems,
        holders,
        free,
        keeper,
        trees,
    )


def _plain(payload: tuple[Any, ...]) -> Hashable:
    return tuple(p if isinstance(p, Hashable) else repr(p) for p in payload)
