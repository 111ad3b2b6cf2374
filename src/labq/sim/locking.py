"""Locks in the simulated world (seed 004): declared locks before a set runs, lock plans as it runs.

The world keeps one :class:`LockTable` for the whole run. Every lock belongs to
a recipe set, as in the service, where tasks take locks with their set's
credentials.

- A set that starts first takes its declared locks all at once
  (:func:`declared_grants`). Until they are granted it is ``waiting``: its
  provisioning has not begun, but it has its running slot.
- Once its recipes run, each recipe's ``lock_plan`` takes a lock ``at`` seconds
  into the recipe's work and lets it go ``for`` seconds after it got it. A
  recipe blocked on a lock makes no progress, so its end moves later by the time
  it waited. A wait that the table refuses (it would deadlock) aborts the recipe.
- Whatever way a set ends, it lets go of everything it holds and its wait.

The table keeps one request per owner, so a set has at most one request in it;
another recipe of the same set that needs a lock meanwhile waits behind it.
Each change of what a set holds is told to the policy (``locks_held``), so the
predictive weight of queued sets goes by the locks running sets really hold.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from labq.domain.locktable import ALL, Grant, LockTable, Outcome, Request, declared_grants
from labq.scheduler.decisions import Decision
from labq.sim.policy import Policy
from labq.sim.runs import LockStep, RecipeRun, SetRun

EPSILON: Final = 1e-6  # seconds: float sums of times may miss an end by a rounding error


@dataclass(eq=False)
class Hold:
    """A plan lock a recipe holds: the table grant it counts on (None: the set declared it)."""

    grant: Grant | None
    released: bool = False


@dataclass(eq=False)
class Progress:
    """How far the work of a recipe with a lock plan has got, and what it holds."""

    recipe: RecipeRun
    steps: tuple[LockStep, ...]
    since: float | None  # when its work last resumed; None while blocked or after it stopped
    done: float = 0.0  # seconds of work before ``since``
    next_step: int = 0
    blocked_since: float | None = None
    stopped_at: float | None = None  # a refused wait aborted it
    holds: list[Hold] = field(default_factory=list)

    def work(self, now: float) -> float:
        """Seconds of work done by ``now``."""
        return self.done + (now - self.since if self.since is not None else 0.0)

    def end(self) -> float:
        """When its work ends if it is not blocked again (infinite while it is blocked)."""
        if self.stopped_at is not None:
            return self.stopped_at
        if self.since is None:
            return math.inf
        return self.since + self.recipe.duration - self.done


@dataclass(eq=False)
class SetLocks:
    """The lock state of one started set."""

    run: SetRun
    declared: tuple[Grant, ...]
    declared_waiting: bool = False
    run_start: float | None = None  # when its recipes' work begins (after provisioning)
    progress: dict[int, Progress] = field(default_factory=dict)  # recipes with a lock plan
    counts: Counter[Grant] = field(default_factory=Counter)  # plan holds on each table grant
    asking: Progress | None = None  # the recipe whose request is in the table
    queue: deque[Progress] = field(default_factory=deque)  # recipes waiting behind it
    blocked: int = 0  # recipes blocked now
    blocked_since: float | None = None
    finish_at: float | None = None  # the FINISH event scheduled for it


def covers(held: Grant, wanted: Grant) -> bool:
    """Whether holding ``held`` already gives ``wanted``."""
    return (
        held.level == wanted.level
        and held.name in (wanted.name, ALL)
        and (held.exclusive or not wanted.exclusive)
    )


class World(Protocol):
    """What the lock service needs of the world (labq.sim.world.World): its clock, its sets,
    its policy, and its event heap."""

    now: float
    sets: dict[int, SetRun]
    policy: Policy

    def apply(self, decisions: Sequence[Decision]) -> None: ...
    def begin_run(self, run: SetRun) -> None: ...
    def schedule_finish(self, time: float, set_id: int, token: int) -> None: ...
    def schedule_step(self, time: float, set_id: int, recipe_id: int) -> None: ...
    def schedule_release(self, time: float, set_id: int, hold: Hold) -> None: ...


class Locking:
    """The world's lock service: one table, the sets' lock states, and a log of holdings."""

    def __init__(self, world: World):
        self.world = world
        self.table = LockTable()
        self.sets: dict[int, SetLocks] = {}
        self.refused = 0  # plan steps whose wait was refused
        # (time, set, what it holds after the change), in the order of the changes
        self.history: list[tuple[float, int, tuple[Grant, ...]]] = []

    # --- a set's life -----------------------------------------------------------------

    def start(self, run: SetRun, lab: str) -> None:
        """The set started: take its declared locks, or wait for them."""
        state = SetLocks(run, declared_grants(run.locks, lab))
        self.sets[run.id] = state
        outcome = self.table.acquire(run.id, state.declared, self.world.now)
        if outcome.refused:  # it holds nothing and nobody waits on it: cannot happen
            raise AssertionError(f"declared locks of set {run.id} refused: {outcome.refused}")
        if outcome.granted:
            self._declared_granted(state)
        else:
            state.declared_waiting = True
            run.lock_waiting = outcome.describe()

    def begin(self, run: SetRun, run_start: float) -> None:
        """Its recipes' work begins at ``run_start``: plan their steps and the set's end."""
        state = self.sets[run.id]
        state.run_start = run_start
        for recipe in run.recipes:
            if recipe.plan:
                progress = Progress(recipe, recipe.plan, since=run_start)
                state.progress[recipe.id] = progress
                self._schedule_step(state, progress)
        self._schedule_finish(state)

    def end(self, run: SetRun) -> None:
        """The set ended, whatever way: close its waits, let go of everything."""
        state = self.sets.pop(run.id, None)
        if state is None:
            return
        now = self.world.now
        run.lock_waiting = None
        if state.declared_waiting:
            run.lock_wait_declared = now - _started(run, now)
        for progress in state.progress.values():
            if progress.blocked_since is not None:
                progress.recipe.lock_wait += now - progress.blocked_since
        if state.blocked_since is not None:
            run.lock_wait_run += now - state.blocked_since
        if run.id in self.table.held or state.declared_waiting or state.asking is not None:
            served = self.table.release(run.id, None)
            self.history.append((now, run.id, ()))
            self._serve(served)

    def work_done(self, run: SetRun, recipe: RecipeRun) -> bool:
        """Whether the recipe's work is done now (else the watchdog or a refused wait stops it)."""
        state = self.sets.get(run.id)
        if state is None or state.run_start is None:
            return False
        progress = state.progress.get(recipe.id)
        if progress is None:
            worked = self.world.now - state.run_start
        elif progress.stopped_at is not None:
            return False
        else:
            worked = progress.work(self.world.now)
        return worked >= recipe.duration - EPSILON

    # --- lock plans ---------------------------------------------------------------------

    def step(self, set_id: int, recipe_id: int) -> None:
        """A recipe reached the next step of its lock plan: ask for the lock."""
        state = self.sets.get(set_id)
        if state is None or state.run.stopping:
            return
        progress = state.progress[recipe_id]
        if progress.stopped_at is not None:
            return
        if state.asking is not None:  # another recipe of the set waits first
            self._block(state, progress)
            state.queue.append(progress)
            return
        self._ask(state, progress)

    def release(self, set_id: int, hold: Hold) -> None:
        """A plan lock's time is up."""
        state = self.sets.get(set_id)
        if state is None or hold.released:
            return
        self._let_go(state, hold)

    def _ask(self, state: SetLocks, progress: Progress) -> None:
        step = progress.steps[progress.next_step]
        run = state.run
        for grant in state.declared:
            if covers(grant, step.grant):
                self._granted(state, progress, None)
                return
        for grant, count in state.counts.items():
            if count > 0 and covers(grant, step.grant):
                state.counts[grant] += 1
                self._granted(state, progress, grant)
                return
        outcome = self.table.acquire(run.id, [step.grant], self.world.now)
        if outcome.granted:
            state.counts[step.grant] += 1
            self._changed(run.id)
            self._granted(state, progress, step.grant)
        elif outcome.refused:
            self._refuse(state, progress, step, outcome)
        else:
            state.asking = progress
            run.lock_waiting = f"{progress.recipe.role or 'a recipe'} {outcome.describe()}"
            if progress.blocked_since is None:  # else it already waited behind a sibling
                self._block(state, progress)

    def _granted(self, state: SetLocks, progress: Progress, grant: Grant | None) -> None:
        """The step got its lock: hold it for its time, resume the work, plan the next step."""
        now = self.world.now
        step = progress.steps[progress.next_step]
        hold = Hold(grant)
        progress.holds.append(hold)
        if grant is not None:  # a lock the set declared stays until the set ends
            self.world.schedule_release(now + step.hold, state.run.id, hold)
        progress.next_step += 1
        if progress.blocked_since is not None:
            self._unblock(state, progress)
        self._schedule_step(state, progress)

    def _refuse(
        self, state: SetLocks, progress: Progress, step: LockStep, outcome: Outcome
    ) -> None:
        """A wait that would deadlock: the recipe aborts here and lets go of its plan locks."""
        run, now = state.run, self.world.now
        self.refused += 1
        if progress.blocked_since is not None:
            self._unblock(state, progress)
        progress.done = progress.work(now)
        progress.since = None
        progress.stopped_at = now
        names = {o: self._name(o) for o in sorted({b.owner for b in outcome.blockers})}
        who = "; ".join(f"set {o} is {name}" for o, name in names.items())
        message = (
            f"recipe {progress.recipe.role or progress.recipe.id} aborted at {now:g} s:"
            f" lock {step.grant} {outcome.refused} ({who})"
        )
        run.error = message if run.error is None else f"{run.error}; {message}"
        for hold in progress.holds:
            if not hold.released:
                self._let_go(state, hold)
        self._schedule_finish(state)

    def _let_go(self, state: SetLocks, hold: Hold) -> None:
        hold.released = True
        if hold.grant is None:
            return
        state.counts[hold.grant] -= 1
        if state.counts[hold.grant] > 0:
            return
        del state.counts[hold.grant]
        served = self.table.release(state.run.id, [hold.grant])
        self._changed(state.run.id)
        self._serve(served)

    def _serve(self, served: list[Request]) -> None:
        """Requests the table granted after a release: declared locks, or a plan step."""
        for request in served:
            state = self.sets[request.owner]
            if state.declared_waiting:
                self._declared_granted(state)
                continue
            progress = state.asking
            assert progress is not None, f"set {request.owner} was granted what it did not ask"
            state.asking = None
            state.run.lock_waiting = None
            grant = progress.steps[progress.next_step].grant
            state.counts[grant] += 1
            self._changed(request.owner)
            self._granted(state, progress, grant)
            while state.queue and state.asking is None and request.owner in self.sets:
                self._ask(state, state.queue.popleft())

    def _declared_granted(self, state: SetLocks) -> None:
        run, now = state.run, self.world.now
        if state.declared_waiting:
            state.declared_waiting = False
            run.lock_wait_declared = now - _started(run, now)
            run.lock_waiting = None
        self._changed(run.id)
        self.world.begin_run(run)

    # --- time ------------------------------------------------------------------------

    def _block(self, state: SetLocks, progress: Progress) -> None:
        now = self.world.now
        progress.done = progress.work(now)
        progress.since = None
        progress.blocked_since = now
        if state.blocked == 0:
            state.blocked_since = now
        state.blocked += 1
        self._schedule_finish(state)

    def _unblock(self, state: SetLocks, progress: Progress) -> None:
        now = self.world.now
        assert progress.blocked_since is not None
        progress.recipe.lock_wait += now - progress.blocked_since
        progress.blocked_since = None
        progress.since = now
        state.blocked -= 1
        if state.blocked == 0 and state.blocked_since is not None:
            state.run.lock_wait_run += now - state.blocked_since
            state.blocked_since = None
        self._schedule_finish(state)

    def _schedule_step(self, state: SetLocks, progress: Progress) -> None:
        if progress.next_step >= len(progress.steps) or progress.since is None:
            return
        ahead = progress.steps[progress.next_step].at - progress.done
        when = max(self.world.now, progress.since + ahead)
        self.world.schedule_step(when, state.run.id, progress.recipe.id)

    def _schedule_finish(self, state: SetLocks) -> None:
        """(Re)schedule the set's end: its last recipe's end, or its watchdog."""
        run = state.run
        if state.run_start is None or run.stopping:
            return
        ends = [
            state.progress[r.id].end() if r.id in state.progress else state.run_start + r.duration
            for r in run.recipes
        ]
        end = max(ends)
        if run.max_time is not None:
            end = min(end, state.run_start + run.max_time)
        if end == state.finish_at:
            return
        state.finish_at = end
        run.finish_token += 1
        if math.isfinite(end):
            self.world.schedule_finish(end, run.id, run.finish_token)

    # --- telling ------------------------------------------------------------------------

    def _changed(self, set_id: int) -> None:
        """What the set holds changed: log it and tell the policy."""
        held = tuple(sorted(self.table.held.get(set_id, ())))
        self.history.append((self.world.now, set_id, held))
        self.world.apply(self.world.policy.locks_held(set_id, held, self.world.now))

    def _name(self, set_id: int) -> str:
        run = self.world.sets.get(set_id)
        return f"job {run.job} set {run.index}" if run else "gone"


def _started(run: SetRun, now: float) -> float:
    return run.started_at if run.started_at is not None else now
