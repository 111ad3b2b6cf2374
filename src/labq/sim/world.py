"""The virtual world: a clock, an event heap, systems and jobs that run for a while.

Events are kept as ``(time, kind order, sequence, event)``: the increasing
sequence number makes every run with the same input and seed the same run.
The world applies each decision of the policy to a lifecycle :class:`Ledger`,
so an illegal move or a system given twice raises at once.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from labq.domain.distro import DistroTree
from labq.domain.lifecycle import Ledger
from labq.domain.model import AccessPolicy, System
from labq.domain.states import Condition, RecipeState, Result, Usage
from labq.scheduler import decisions as d
from labq.scheduler.core import Scheduler
from labq.scheduler.entries import SystemEntry
from labq.sim.locking import Hold, Locking
from labq.sim.policy import Policy
from labq.sim.predicting import ForecastLog, Foresight
from labq.sim.runs import RecipeRun, SetRun

# Order of kinds at the same instant: ends free systems before new work arrives,
# and plan locks are let go of before plan steps ask for theirs.
FINISH, RUNNING, RELEASE, STEP, CONDITION, CONTROL, SUBMIT, TICK, CONSISTENCY = range(9)


@dataclass
class World:
    """Everything the simulation keeps, and the event heap that moves it."""

    policy: Policy
    access: AccessPolicy
    install_time: float = 0.0
    now: float = 0.0
    ledger: Ledger = field(default_factory=Ledger)
    sets: dict[int, SetRun] = field(default_factory=dict)
    recipes: dict[int, RecipeRun] = field(default_factory=dict)
    jobs: dict[str, list[int]] = field(default_factory=dict)
    decisions: int = 0
    idle_rounds: int = 0
    running_sets: int = 0
    running_peak: int = 0  # the most sets started and not finished at once
    closed: int = 0  # set attempts ended, whatever way (a progress bar counts them)
    ended: float | None = None  # where the run stopped: the last event, or ``until``
    lab_running: Counter[str] = field(default_factory=Counter)
    lab_running_peak: Counter[str] = field(default_factory=Counter)
    submitted: set[int] = field(default_factory=set)
    trees: dict[str, tuple[DistroTree, ...]] = field(default_factory=dict)  # lab -> carried
    # when, recipe, slot, and the lab's physical systems idle at that moment (for checks)
    vms_created: list[tuple[float, int, str, tuple[str, ...]]] = field(default_factory=list)
    locking: Locking = field(init=False)
    foresight: Foresight | None = None  # predictions the policy is told (sim/predicting.py)
    forecasts: ForecastLog | None = None  # the core's forecasts, logged (sim/predicting.py)
    _heap: list[tuple[float, int, int, tuple[Any, ...]]] = field(default_factory=list)
    _seq: itertools.count[int] = field(default_factory=itertools.count)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def __post_init__(self) -> None:
        self.locking = Locking(self)

    # --- the heap -------------------------------------------------------------------

    def at(self, time: float, kind: int, *payload: Any) -> None:
        """Schedule an event."""
        heapq.heappush(self._heap, (time, kind, next(self._seq), payload))

    def pop(self) -> tuple[float, int, tuple[Any, ...]] | None:
        """The next event, with the clock moved to it."""
        if not self._heap:
            return None
        time, kind, _, payload = heapq.heappop(self._heap)
        self.now = max(self.now, time)
        return time, kind, payload

    def has(self, *kinds: int) -> bool:
        """Whether any event of these kinds is still to come."""
        return any(entry[1] in kinds for entry in self._heap)

    def new_id(self) -> int:
        """A fresh id for a set or recipe."""
        return next(self._ids)

    def schedule_finish(self, time: float, set_id: int, token: int) -> None:
        """The set's end as now foreseen (an older token is then stale)."""
        self.at(time, FINISH, set_id, token)

    def schedule_step(self, time: float, set_id: int, recipe_id: int) -> None:
        """A recipe reaches the next step of its lock plan."""
        self.at(time, STEP, set_id, recipe_id)

    def schedule_release(self, time: float, set_id: int, hold: Hold) -> None:
        """A plan lock's time is up."""
        self.at(time, RELEASE, set_id, hold)

    # --- systems -----------------------------------------------------------------------

    def add_system(self, system: System, condition: Condition, vm: str | None = None) -> None:
        """A system joins at the current time; the policy hears of it (``vm``: a VM slot of
        this size)."""
        system.condition = condition
        self.ledger.add_system(system, self.now)
        entry = SystemEntry(system.fqdn, system.lab, system.facts(), system.pools, condition, vm=vm)
        self.apply(self.policy.add_system(entry, self.now))

    def set_trees(self, lab: str, trees: Sequence[DistroTree]) -> None:
        """The lab carries exactly these distro trees from now on."""
        self.trees[lab] = tuple(trees)
        self.apply(self.policy.set_trees(lab, trees, self.now))

    def set_condition(self, fqdn: str, condition: Condition) -> None:
        """An admin changes a system's condition."""
        self.ledger.set_condition(fqdn, condition, self.now)
        self.apply(self.policy.change_condition(fqdn, condition, self.now))

    # --- jobs -----------------------------------------------------------------------------

    def add_set(self, run: SetRun) -> None:
        """Register a set attempt and its recipes (not yet submitted)."""
        self.sets[run.id] = run
        self.jobs.setdefault(run.job, []).append(run.id)
        for recipe in run.recipes:
            self.recipes[recipe.id] = recipe
            self.ledger.add_recipe(recipe.id)

    def submit(self, set_ids: Sequence[int]) -> None:
        """The new-job event for some sets."""
        fresh = [i for i in set_ids if self.sets[i].finished_at is None]
        self.submitted.update(fresh)
        if self.foresight is not None:
            for i in fresh:
                self.foresight.predict(self.sets[i], self.install_time)
        subs = [self.sets[i].submission() for i in fresh]
        if subs:
            self.apply(self.policy.submit(subs, self.now))
            if self.forecasts is not None and isinstance(self.policy, Scheduler):
                self.forecasts.submitted(self.policy, fresh, self.now)

    def cancel_unsubmitted(self, set_id: int) -> None:
        """A job cancelled before it arrived never reaches the policy."""
        for recipe in self.sets[set_id].recipes:
            self._end(recipe.id, RecipeState.CANCELLED)

    # --- decisions ------------------------------------------------------------------------

    def apply(self, decisions: Sequence[d.Decision]) -> None:
        """Carry out the policy's decisions in order."""
        for decision in decisions:
            self.decisions += 1
            self._apply_one(decision)
        if decisions and self.forecasts is not None and isinstance(self.policy, Scheduler):
            self.forecasts.decided(self.policy, self.now)

    def _apply_one(self, decision: d.Decision) -> None:
        now = self.now
        if isinstance(decision, d.Schedule):
            recipe = self.recipes[decision.recipe]
            self.ledger.move_recipe(recipe.id, RecipeState.SCHEDULED, now, system=decision.system)
            recipe.state, recipe.system, recipe.scheduled_at = (
                RecipeState.SCHEDULED,
                decision.system,
                now,
            )
            recipe.ran_on = decision.system
        elif isinstance(decision, d.Assign | d.Release):
            self._move(decision.recipe, RecipeState.ASSIGNED)
        elif isinstance(decision, d.Enqueue):
            self._move(decision.recipe, RecipeState.QUEUED)
        elif isinstance(decision, d.Idle):
            if self.ledger.systems[decision.system].usage is Usage.PENDING:
                self.ledger.set_usage(decision.system, Usage.IDLE, now)
        elif isinstance(decision, d.Start):
            self._start(self.sets[decision.set], decision.lab)
        elif isinstance(decision, d.CreateVm):
            idle = tuple(
                s.fqdn
                for s in self.ledger.systems.values()
                if s.lab == decision.lab
                and s.recipe is None
                and s.usage in (Usage.IDLE, Usage.PENDING)
                and s.condition is Condition.AUTOMATED
                and "vm_size" not in s.attributes
            )
            self.vms_created.append((now, decision.recipe, decision.system, idle))
        elif isinstance(decision, d.Cancel):
            self._end(decision.recipe, RecipeState.CANCELLED)
        elif isinstance(decision, d.Abort):
            self._end(decision.recipe, RecipeState.ABORTED)
        elif isinstance(decision, d.Stop):
            self._stop(self.sets[decision.set])
        elif isinstance(decision, d.Retry):
            self._retry(self.sets[decision.set], decision)
        elif isinstance(decision, d.SetError):
            self.sets[decision.set].error = decision.message

    def _move(self, recipe_id: int, state: RecipeState) -> None:
        recipe = self.recipes[recipe_id]
        self.ledger.move_recipe(recipe_id, state, self.now)
        recipe.state = state
        recipe.system = self.ledger.recipes[recipe_id].system

    def _end(self, recipe_id: int, state: RecipeState, *, whole_set: bool = False) -> None:
        """End one recipe; ``whole_set`` when the caller ends every recipe of its set."""
        self._move(recipe_id, state)
        recipe = self.recipes[recipe_id]
        recipe.finished_at = self.now
        run = self.sets[recipe.set_id]
        if whole_set or run.finished_at is not None:
            return
        if all(r.state.is_final for r in run.recipes):
            self._close(run)

    def _close(self, run: SetRun) -> None:
        """The set ended, whatever way: it lets go of its running slot and its locks."""
        run.finished_at = self.now
        self.closed += 1
        if run.started_at is not None:
            self.running_sets -= 1
            if run.lab is not None:
                self.lab_running[run.lab] -= 1
            self.locking.end(run)  # before the policy hears of it: its locks are free for others

    def _start(self, run: SetRun, lab: str) -> None:
        """The set has its systems and a running slot: it waits for its locks, then provisions."""
        run.started_at = self.now
        run.lab = lab
        self.running_sets += 1
        self.running_peak = max(self.running_peak, self.running_sets)
        self.lab_running[lab] += 1
        self.lab_running_peak[lab] = max(self.lab_running_peak[lab], self.lab_running[lab])
        for recipe in run.recipes:
            self._move(recipe.id, RecipeState.WAITING)
            recipe.started_at = self.now
        self.locking.start(run, lab)
        self.apply(self.policy.started(run.id, self.now))

    def begin_run(self, run: SetRun) -> None:
        """Its declared locks are granted: provisioning begins, then its recipes' work."""
        for recipe in run.recipes:
            self._move(recipe.id, RecipeState.INSTALLING)
        self.at(self.now + self.install_time, RUNNING, run.id)
        self.locking.begin(run, self.now + self.install_time)

    def mark_running(self, set_id: int) -> None:
        """Provisioning done: the set's recipes run."""
        run = self.sets[set_id]
        if run.finished_at is not None:
            return
        for recipe in run.recipes:
            if recipe.state is RecipeState.INSTALLING:
                self._move(recipe.id, RecipeState.RUNNING)

    def finish_set(self, set_id: int, token: int, stopped: bool = False) -> None:
        """The set's time is up (each recipe ends as its outcome says) or it was stopped."""
        run = self.sets[set_id]
        if token != run.finish_token or run.finished_at is not None:
            return
        if stopped:
            self._cancel_running(run)
            return
        outcomes = {}
        for recipe in run.recipes:
            if recipe.state is RecipeState.INSTALLING:
                self._move(recipe.id, RecipeState.RUNNING)
            state, result = self._outcome(run, recipe)
            recipe.result = result
            outcomes[recipe.id] = state
            self._end(recipe.id, state, whole_set=True)
        self._close(run)
        if self.foresight is not None:
            self.foresight.learn(run, outcomes)
        self.apply(self.policy.finish(set_id, outcomes, self.now))

    def _outcome(self, run: SetRun, recipe: RecipeRun) -> tuple[RecipeState, Result | None]:
        if not self.locking.work_done(run, recipe):
            return RecipeState.ABORTED, Result.FAIL  # the watchdog, or a refused lock wait
        if recipe.outcome == "abort" or (
            isinstance(recipe.outcome, list) and recipe.system in recipe.outcome
        ):
            return RecipeState.ABORTED, Result.FAIL
        if recipe.outcome == "fail":
            return RecipeState.COMPLETED, Result.FAIL
        return RecipeState.COMPLETED, Result.PASS

    def _stop(self, run: SetRun) -> None:
        """Stop a running set. It ends as an event of its own at this instant: the
        policy must not hear of it while the rest of its current decisions wait."""
        if run.finished_at is not None:
            return
        run.stopping = True
        run.finish_token += 1
        self.at(self.now, FINISH, run.id, run.finish_token, True)

    def _cancel_running(self, run: SetRun) -> None:
        outcomes = {}
        for recipe in run.recipes:
            outcomes[recipe.id] = RecipeState.CANCELLED
            self._end(recipe.id, RecipeState.CANCELLED, whole_set=True)
        self._close(run)
        self.apply(self.policy.finish(run.id, outcomes, self.now))

    def _retry(self, run: SetRun, decision: d.Retry) -> None:
        clone = SetRun(
            id=self.new_id(),
            job=run.job,
            index=run.index,
            attempt=decision.attempt,
            submitted=self.now,
            priority=run.priority,
            group=run.group,
            max_time=run.max_time,
            max_retries=run.max_retries,
            locks=run.locks,
            retry_of=run.id,
            recipes=[],
            signature=run.signature,
        )
        for i, recipe in enumerate(run.recipes):
            clone.recipes.append(
                RecipeRun(
                    id=self.new_id(),
                    set_id=clone.id,
                    role=recipe.role,
                    requirement=recipe.requirement,
                    duration=recipe.duration,
                    outcome=recipe.outcome,
                    excluded=decision.excluded.get(i, recipe.excluded),
                    force=recipe.force,
                    plan=recipe.plan,
                )
            )
        self.add_set(clone)
        self.at(self.now, SUBMIT, (clone.id,))

    # --- questions ------------------------------------------------------------------------

    def running(self) -> bool:
        """Whether any set has started and not finished."""
        return self.running_sets > 0

    def waiting(self) -> list[SetRun]:
        """Sets submitted that never started nor finished."""
        return [r for r in self.sets.values() if r.started_at is None and r.finished_at is None]
