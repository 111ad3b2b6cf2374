"""The set runner: everything a supervisor does for one recipe set, with no database.

:func:`run_set` provisions every system (recipes move ``installing``), runs each
recipe's tasks in order with the recipes of the set at once (one thread each;
tasks numbered with steps run step by step across the recipes, steps.py),
enforces every task's timeout and the set's ``max_time``, archives every
system's logs — also after a timeout, abort or cancel, and always before any
clean-up — then cleans up ("nukes") the systems whose recipe failed or did not
complete, and only then reports each recipe's final state.

Aborts are set-wide: a provisioning failure, a task timeout or a task that could
not run aborts its recipe and stops the rest of the set (the whole set is
retried by the scheduler's rules, and its partners would otherwise wait for a
peer that is gone). Recipes that had already finished keep their state.

This module keeps the flow (the start, the locks, the phases, the steps, the
stop requests and the end); the work is done by :mod:`~labq.dispatch.installing`
(provisioning and guests), :mod:`~labq.dispatch.task` (one task) and
:mod:`~labq.dispatch.teardown` (archiving and clean-up).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Final

from labq.dispatch.environment import check_plan
from labq.dispatch.fetch import FetchOptions
from labq.dispatch.installing import Installer
from labq.dispatch.logs import MaskedLog, set_log_dir, system_log_dir
from labq.dispatch.plan import PlanError, SetPlan, TaskPlan
from labq.dispatch.recipes import Guest, Place, RecipeRun, final_state
from labq.dispatch.reporting import SafeReporter
from labq.dispatch.results import RecipeOutcome, Reporter, SetOutcome, recipe_result
from labq.dispatch.setcontext import Backends, Checkout, SetContext
from labq.dispatch.steps import StepGate
from labq.dispatch.stopping import Stop, StopKind
from labq.dispatch.task import TaskRunner
from labq.dispatch.teardown import archive, clean_up, release
from labq.domain.locktable import Outcome
from labq.domain.states import RecipeState

__all__ = ["LOCK_POLL", "Backends", "SetContext", "SetRunner", "run_set"]

_TICK: Final = 0.05
LOCK_POLL: Final = 1.0  # seconds between asks while the set waits for its locks


def run_set(
    plan: SetPlan,
    backends: Backends,
    *,
    data_dir: Path,
    reporter: Reporter,
    heartbeat_every: float,
    clock: Callable[[], float] = time.monotonic,
    cancel: threading.Event | None = None,
    lost: threading.Event | None = None,
    take_locks: Callable[[], Outcome] | None = None,
    fetch: FetchOptions | None = None,
) -> SetOutcome:
    """Run a recipe set to its end and say how it ended; see the module docstring.

    ``cancel``, when set (from any thread), stops everything the way ``max_time``
    does, but the recipes end ``cancelled``. ``lost``, when set, means the set is
    someone else's now: its tasks are ended at once, and nothing is archived,
    cleaned up or reported after that (the systems may be another set's already).
    ``fetch`` says how fetched tasks are downloaded (default: cached under
    ``<data_dir>/fetched``, no URL rewrites).
    Never raises for a bad plan, an unreachable system or a failing hook: those
    abort recipes, with the reason.
    """
    if heartbeat_every <= 0:
        raise ValueError("heartbeat_every must be positive")
    set_dir = set_log_dir(data_dir, plan.id)
    set_dir.mkdir(parents=True, exist_ok=True)
    log = MaskedLog(set_dir / "supervisor.log", plan.secrets)
    try:
        context = SetContext(
            plan=plan,
            backends=backends,
            data_dir=data_dir,
            reporter=SafeReporter(reporter, log, plan.secrets),
            heartbeat_every=heartbeat_every,
            clock=clock,
            cancel=cancel,
            lost=lost,
            take_locks=take_locks,
            fetch=fetch or FetchOptions(data_dir / "fetched"),
        )
        return SetRunner(context).execute()
    finally:
        log.close()


class SetRunner:
    """Runs one set to its end, once: :meth:`execute`."""

    def __init__(self, context: SetContext) -> None:
        self.context = context
        self.reporter = context.reporter
        self.stop = Stop(context.reporter)  # every running task and hook watches this
        self.recipes: list[RecipeRun] = []
        self.checkout = Checkout(context.plan)  # the pinned ref's, once checked out
        # the deadline is ``began + max_time``; a heartbeat's answer may move max_time
        self.began: float | None = None
        self.max_time: float | None = context.plan.max_time
        self.steps = StepGate({})

    # -- the phases ---------------------------------------------------------

    def execute(self) -> SetOutcome:
        """Run the set: wait for its locks, install, run, archive, clean up, report."""
        plan = self.context.plan
        beat_stop = threading.Event()
        beat = threading.Thread(target=self._beat, args=(beat_stop,), daemon=True)
        beat.start()
        try:
            self.reporter.log(f"set {plan.id} of job {plan.job_id} starts")
            locked = self._wait_for_locks()  # max_time counts from when it has them
            self.began = self.context.clock()
            if locked and self._prepare():
                self._install_and_run()
            self._check_limits()
            if self.stop.kind is not StopKind.LOST:
                self._phase(partial(archive, self.context), "archive", limits=False)
                self._phase(partial(clean_up, self.context, self.stop), "cleanup", limits=False)
                self._phase(partial(release, self.context, self.stop), "release", limits=False)
            # no heartbeat may race the final write: one after it finds the set ended and
            # would take the supervisor for one whose claim was lost
            beat_stop.set()
            beat.join()
            outcome = self._finish()
        finally:
            self.stop.end()
            beat_stop.set()
            beat.join()
        return outcome

    def _install_and_run(self) -> None:
        self._check_limits()
        if not self.stop.is_set():
            installer = Installer(self.context, self.stop, self.checkout)
            self._phase(installer.provision, "provision")
        if not self.stop.is_set():
            running = [r for r in self.recipes if r.backend is not None]
            self.steps = StepGate({r.plan.id: [t.step for t in r.plan.tasks] for r in running})
            tasks = TaskRunner(self.context, self.stop, self.checkout)
            self._phase(partial(self._run_recipe, tasks), "run")

    def _prepare(self) -> bool:
        """Check the plan, find the backends, check out the pinned ref; False aborts all."""
        try:
            self._take_plan()
        except Exception as exc:
            self._abort_unstarted(f"cannot run this set: {exc}")
            return False
        for r in self.recipes:
            self.reporter.recipe_state(r.plan.id, RecipeState.WAITING)
        if self.context.plan.ref_repo:
            try:
                self.checkout = Checkout.of(self.context.plan, self.context.data_dir)
            except Exception as exc:
                self.stop.request(StopKind.ABORT, f"cannot check out the pinned ref: {exc}")
                for r in self.recipes:
                    r.reason = self.stop.reason
                return False
        return True

    def _take_plan(self) -> None:
        """A record per recipe, its log directories made and its backend found."""
        plan, seen = self.context.plan, set[str]()
        check_plan(plan)
        for recipe in plan.recipes:
            fqdn = recipe.system.fqdn
            if fqdn in seen:
                raise PlanError(f"system {fqdn} is given to two recipes")
            seen.add(fqdn)
            log_dir = system_log_dir(self.context.data_dir, plan.id, fqdn)
            log_dir.mkdir(parents=True, exist_ok=True)
            guests = [Guest(g, log_dir / "guests" / g.system.fqdn) for g in recipe.guests]
            for g in guests:
                g.log_dir.mkdir(parents=True, exist_ok=True)
            backend = self.context.backends[recipe.system.lab]
            self.recipes.append(RecipeRun(recipe, backend, log_dir, guests))

    def _wait_for_locks(self) -> bool:
        """Take the set's declared locks, all together, waiting while others hold them.

        False when the set must stop instead: cancelled, or the wait refused.
        """
        take_locks = self.context.take_locks
        if take_locks is None:
            return True
        said = ""
        while True:
            try:
                outcome = take_locks()
            except Exception as exc:
                self._abort_unstarted(f"cannot take the set's locks: {exc}")
                return False
            if outcome.granted:
                if said:
                    self.reporter.log("the set has its locks")
                return True
            if outcome.refused is not None:
                self._abort_unstarted(f"cannot take the set's locks: {outcome.refused}")
                return False
            if outcome.describe() != said:
                said = outcome.describe()
                self.reporter.log(f"the set is {said}")
            self._check_limits()
            if self.stop.event.wait(LOCK_POLL):
                self._account_unstarted()
                return False

    def _abort_unstarted(self, reason: str) -> None:
        self.reporter.log(reason)
        self.stop.request(StopKind.ABORT, reason)
        self._account_unstarted()
        for r in self.recipes:
            r.reason = reason

    def _account_unstarted(self) -> None:
        """Stopped before it began: every recipe is accounted for, none was touched."""
        known = {r.plan.id for r in self.recipes}
        for recipe in self.context.plan.recipes:
            if recipe.id not in known:
                self.recipes.append(RecipeRun(recipe, None, self.context.set_dir))

    def _phase(self, work: Callable[[RecipeRun], None], name: str, *, limits: bool = True) -> None:
        """Run ``work`` for every recipe at once; watch the clock and the cancel while waiting."""
        threads = [
            threading.Thread(
                target=self._guarded, args=(work, r), name=f"{name}-{r.plan.id}", daemon=True
            )
            for r in self.recipes
            if r.backend is not None and (limits or r.touched)
        ]
        for t in threads:
            t.start()
        try:
            while alive := [t for t in threads if t.is_alive()]:
                if limits:
                    self._check_limits()
                alive[0].join(_TICK)
        finally:
            if any(t.is_alive() for t in threads):  # interrupted: end every task first
                self.stop.end()
            for t in threads:
                t.join()

    def _guarded(self, work: Callable[[RecipeRun], None], r: RecipeRun) -> None:
        try:
            work(r)
        except Exception as exc:
            reason = f"internal error in the supervisor: {exc!r}"
            self.reporter.log(f"{r.label}: {reason}")
            if r.reason is None and not r.finished:
                r.reason = reason
                self.stop.request(StopKind.ABORT, f"{r.label}: {reason}")

    # -- stop requests ------------------------------------------------------------

    def _check_limits(self) -> None:
        lost, cancel = self.context.lost, self.context.cancel
        if lost is not None and lost.is_set():
            self.stop.request(StopKind.LOST, "the set is no longer this supervisor's")
        if cancel is not None and cancel.is_set():
            self.stop.request(StopKind.CANCEL, "cancelled")
        max_time = self.max_time
        if (
            self.began is not None
            and max_time is not None
            and self.context.clock() >= self.began + max_time
        ):
            self.stop.request(StopKind.MAX_TIME, f"exceeded max_time of {max_time:g} s")

    def _beat(self, done: threading.Event) -> None:
        while True:
            self._hear_max_time(self.reporter.heartbeat())
            if done.wait(self.context.heartbeat_every):
                return

    def _hear_max_time(self, heard: float | None) -> None:
        """A heartbeat's answer moved the set's max_time (extended): keep to the new one."""
        if (
            heard is None
            or heard <= 0
            or heard == self.max_time
            or self.context.plan.max_time is None
        ):
            return  # a set without a max_time never gets one
        self.max_time = heard
        self.reporter.log(f"the set's max_time is now {heard:g} s")

    # -- the tasks and their steps ------------------------------------------------

    def _run_recipe(self, tasks: TaskRunner, r: RecipeRun) -> None:
        """The recipe's tasks, and each guest's at the same time (the guests exist now)."""
        assert r.backend is not None
        self.reporter.recipe_state(r.plan.id, RecipeState.RUNNING)
        done: list[bool] = []

        def guest(g: Guest) -> None:
            # as _guarded does for a recipe: an internal error aborts, never vanishes
            self._guarded(
                lambda _r: done.append(self._run_tasks(tasks, r, g.place, g.plan.tasks)), r
            )

        threads = [
            threading.Thread(
                target=guest, args=(g,), name=f"guest-{r.plan.id}-{g.plan.system.fqdn}", daemon=True
            )
            for g in r.guests
        ]
        for t in threads:
            t.start()
        try:
            own = self._run_tasks(tasks, r, r.place, r.plan.tasks, stepped=True)
        finally:
            self.steps.leave(r.plan.id)  # its partners must not wait for steps it will not run
        for t in threads:
            t.join()
        r.finished = own and len(done) == len(threads) and all(done)

    def _run_tasks(
        self,
        tasks: TaskRunner,
        r: RecipeRun,
        place: Place,
        plans: tuple[TaskPlan, ...],
        *,
        stepped: bool = False,
    ) -> bool:
        """Run tasks in order at one place; True when every one ran to its end.

        ``stepped``: the recipe's own tasks, each waiting for its step of the set's one
        ordered task list (a guest's tasks have no steps)."""
        for task in plans:
            if self.stop.is_set():
                return False
            if stepped and not self.steps.wait(task.step, self.stop.event):
                return False
            end = tasks.run(r, task, place)
            r.tasks.append(end.outcome)
            if end.abort is not None:
                r.abort(end.abort)
                self.stop.request(StopKind.ABORT, f"{r.label}: {end.abort}")
                return False  # the set stops before leave() lets a partner's next step go
            if end.outcome.stopped:
                return False
            if stepped:
                self.steps.done(r.plan.id, task.step)
        return True

    # -- the end ------------------------------------------------------------

    def _finish(self) -> SetOutcome:
        outcomes = []
        for r in self.recipes:
            state, reason = final_state(r, self.stop)
            tasks = tuple(r.tasks)
            outcomes.append(
                RecipeOutcome(
                    r.plan.id,
                    r.plan.system.fqdn,
                    state,
                    recipe_result(state, tasks),
                    reason,
                    tasks,
                    r.log_dir,
                    r.cleaned_up,
                    r.cleanup_error,
                    r.logs_error,
                )
            )
            if self.stop.kind is not StopKind.LOST:
                self.reporter.recipe_state(r.plan.id, state, reason)
        plan = self.context.plan
        outcome = SetOutcome(plan.id, tuple(outcomes), self.context.set_dir, self.reporter.errors())
        result = outcome.result.value if outcome.result else "none"
        self.reporter.log(f"set {plan.id} ends {outcome.state.value}, result {result}")
        return outcome
