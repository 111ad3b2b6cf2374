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
"""

from __future__ import annotations

import dataclasses
import enum
import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from labq.dispatch.backends import Backend
from labq.dispatch.environment import (
    check_names,
    check_plan,
    role_members,
    task_environment,
)
from labq.dispatch.fetch import FetchError, FetchOptions, fetch_task
from labq.dispatch.logs import (
    MaskedLog,
    mask_tree,
    set_log_dir,
    stamp,
    system_log_dir,
    task_log_name,
)
from labq.dispatch.plan import (
    GuestPlan,
    PlanError,
    RecipePlan,
    SetPlan,
    SystemInfo,
    TaskPlan,
    Workspace,
    task_path,
)
from labq.dispatch.reporting import SafeReporter
from labq.dispatch.results import (
    RecipeOutcome,
    Reporter,
    SetOutcome,
    TaskOutcome,
    judge_exit,
    recipe_result,
)
from labq.dispatch.steps import StepGate
from labq.dispatch.taskdir import MAX_TIME_PARAMS, TaskDirError, parse_time, read_task_dir
from labq.dispatch.workspace import cached_checkout
from labq.domain.locktable import Outcome
from labq.domain.states import RecipeState, Result

BackendFor = Callable[[SystemInfo], Backend]
_TICK: Final = 0.05
FETCHED_DIR: Final = "fetched"  # fetched tasks go to <workspace>/fetched/<task id>
LOCK_POLL: Final = 1.0  # seconds between asks while the set waits for its locks


class StopKind(enum.Enum):
    """Why a set stopped early; the first reason given wins."""

    CANCEL = "cancel"
    MAX_TIME = "max_time"
    ABORT = "abort"
    LOST = "lost"  # the set is no longer ours: end the tasks, touch and report nothing more


@dataclass(frozen=True)
class _Place:
    """Where a task runs: a recipe's system or one of its guests."""

    system: SystemInfo
    log_dir: Path
    role: str | None
    guest: GuestPlan | None = None


@dataclass
class _Guest:
    plan: GuestPlan
    log_dir: Path
    made: bool = False  # guest_create began: destroy it at the end

    @property
    def place(self) -> _Place:
        return _Place(self.plan.system, self.log_dir, self.plan.role, self.plan)


@dataclass
class _Recipe:
    plan: RecipePlan
    backend: Backend | None  # None: the set never started
    log_dir: Path
    guests: list[_Guest] = field(default_factory=list)
    touched: bool = False  # provisioning began, so there is something to archive and clean
    tasks: list[TaskOutcome] = field(default_factory=list)
    reason: str | None = None  # why this recipe itself aborted
    finished: bool = False  # every task ran to its end
    cleaned_up: bool = False
    cleanup_error: str | None = None
    logs_error: str | None = None

    @property
    def label(self) -> str:
        return f"recipe {self.plan.id} on {self.plan.system.fqdn}"

    @property
    def place(self) -> _Place:
        return _Place(self.plan.system, self.log_dir, self.plan.role)


def run_set(
    plan: SetPlan,
    backend_for: BackendFor,
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
    run = _SetRun(plan, backend_for, data_dir, reporter, heartbeat_every, clock, cancel)
    run.take_locks = take_locks
    run.lost = lost
    run.fetch = fetch or FetchOptions(data_dir / "fetched")
    return run.execute()


class _SetRun:
    def __init__(
        self,
        plan: SetPlan,
        backend_for: BackendFor,
        data_dir: Path,
        reporter: Reporter,
        heartbeat_every: float,
        clock: Callable[[], float],
        cancel: threading.Event | None,
    ) -> None:
        self.plan = plan
        self.backend_for = backend_for
        self.data_dir = data_dir
        self.dir = set_log_dir(data_dir, plan.id)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log = MaskedLog(self.dir / "supervisor.log", plan.secrets)
        self.reporter = SafeReporter(reporter, self.log, plan.secrets)
        self.heartbeat_every = heartbeat_every
        self.clock = clock
        self.cancel = cancel
        self.stop = threading.Event()  # every running task and hook watches this
        self._stop_lock = threading.Lock()
        self.stop_kind: StopKind | None = None
        self.stop_reason = ""
        self.recipes: list[_Recipe] = []
        self.workspace_dir: Path | None = None
        # the deadline is ``began + max_time``; a heartbeat's answer may move max_time
        self.began: float | None = None
        self.max_time: float | None = plan.max_time
        self.take_locks: Callable[[], Outcome] | None = None
        self.lost: threading.Event | None = None
        self.steps = StepGate({})
        self.fetch = FetchOptions(data_dir / "fetched")

    # -- the phases ---------------------------------------------------------

    def execute(self) -> SetOutcome:
        beat_stop = threading.Event()
        beat = threading.Thread(target=self._beat, args=(beat_stop,), daemon=True)
        beat.start()
        try:
            self.reporter.log(f"set {self.plan.id} of job {self.plan.job_id} starts")
            locked = self._wait_for_locks()  # max_time counts from when it has them
            self.began = self.clock()
            if locked and self._prepare():
                self._check_limits()
                if not self.stop.is_set():
                    self._phase(self._provision, "provision")
                if not self.stop.is_set():
                    running = [r for r in self.recipes if r.backend is not None]
                    self.steps = StepGate(
                        {r.plan.id: [t.step for t in r.plan.tasks] for r in running}
                    )
                    self._phase(self._run_recipe, "run")
            self._check_limits()
            if self.stop_kind is not StopKind.LOST:
                self._phase(self._archive, "archive", limits=False)
                self._phase(self._cleanup, "cleanup", limits=False)
            # no heartbeat may race the final write: one after it finds the set ended and
            # would take the supervisor for one whose claim was lost
            beat_stop.set()
            beat.join()
            outcome = self._finish()
        finally:
            self.stop.set()
            beat_stop.set()
            beat.join()
            self.log.close()
        return outcome

    def _prepare(self) -> bool:
        """Check the plan, find the backends, check out the pinned ref; False aborts all."""
        seen: set[str] = set()
        try:
            check_plan(self.plan)
            for recipe in self.plan.recipes:
                fqdn = recipe.system.fqdn
                if fqdn in seen:
                    raise PlanError(f"system {fqdn} is given to two recipes")
                seen.add(fqdn)
                log_dir = system_log_dir(self.data_dir, self.plan.id, fqdn)
                log_dir.mkdir(parents=True, exist_ok=True)
                guests = [_Guest(g, log_dir / "guests" / g.system.fqdn) for g in recipe.guests]
                for g in guests:
                    g.log_dir.mkdir(parents=True, exist_ok=True)
                backend = self.backend_for(recipe.system)
                self.recipes.append(_Recipe(recipe, backend, log_dir, guests))
        except Exception as exc:
            self._abort_unstarted(f"cannot run this set: {exc}")
            return False
        for r in self.recipes:
            self.reporter.recipe_state(r.plan.id, RecipeState.WAITING)
        if self.plan.ref_repo:
            try:
                self._checkout(self.plan.ref_repo)
            except Exception as exc:
                self._request_stop(StopKind.ABORT, f"cannot check out the pinned ref: {exc}")
                for r in self.recipes:
                    r.reason = self.stop_reason
                return False
        return True

    def _wait_for_locks(self) -> bool:
        """Take the set's declared locks, all together, waiting while others hold them.

        False when the set must stop instead: cancelled, or the wait refused.
        """
        if self.take_locks is None:
            return True
        said = ""
        while True:
            try:
                outcome = self.take_locks()
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
            if self.stop.wait(LOCK_POLL):
                self._account_unstarted()
                return False

    def _checkout(self, repo: str) -> None:
        assert self.plan.ref_commit is not None  # check_plan saw to it
        self.workspace_dir = cached_checkout(repo, self.plan.ref_commit, self.data_dir / "refs")
        if self.workspace_dir.name != self.plan.ref_commit:  # abbreviated, now known in full
            self.plan = dataclasses.replace(self.plan, ref_commit=self.workspace_dir.name)

    def _abort_unstarted(self, reason: str) -> None:
        self.reporter.log(reason)
        self._request_stop(StopKind.ABORT, reason)
        self._account_unstarted()
        for r in self.recipes:
            r.reason = reason

    def _account_unstarted(self) -> None:
        """Stopped before it began: every recipe is accounted for, none was touched."""
        known = {r.plan.id for r in self.recipes}
        for recipe in self.plan.recipes:
            if recipe.id not in known:
                self.recipes.append(_Recipe(recipe, None, self.dir))

    def _phase(self, work: Callable[[_Recipe], None], name: str, *, limits: bool = True) -> None:
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
                self.stop.set()
            for t in threads:
                t.join()

    def _guarded(self, work: Callable[[_Recipe], None], r: _Recipe) -> None:
        try:
            work(r)
        except Exception as exc:
            reason = f"internal error in the supervisor: {exc!r}"
            self.reporter.log(f"{r.label}: {reason}")
            if r.reason is None and not r.finished:
                r.reason = reason
                self._request_stop(StopKind.ABORT, f"{r.label}: {reason}")

    def _check_limits(self) -> None:
        if self.lost is not None and self.lost.is_set():
            self._request_stop(StopKind.LOST, "the set is no longer this supervisor's")
        if self.cancel is not None and self.cancel.is_set():
            self._request_stop(StopKind.CANCEL, "cancelled")
        max_time = self.max_time
        if (
            self.began is not None
            and max_time is not None
            and self.clock() >= self.began + max_time
        ):
            self._request_stop(StopKind.MAX_TIME, f"exceeded max_time of {max_time:g} s")

    def _request_stop(self, kind: StopKind, reason: str) -> None:
        with self._stop_lock:
            if self.stop_kind is not None and kind is not StopKind.LOST:
                return
            if self.stop_kind is StopKind.LOST:
                return
            self.stop_kind, self.stop_reason = kind, reason
        self.reporter.log(f"stopping the set: {reason}")
        self.stop.set()

    def _beat(self, done: threading.Event) -> None:
        while True:
            self._hear_max_time(self.reporter.heartbeat())
            if done.wait(self.heartbeat_every):
                return

    def _hear_max_time(self, heard: float | None) -> None:
        """A heartbeat's answer moved the set's max_time (extended): keep to the new one."""
        if heard is None or heard <= 0 or heard == self.max_time or self.plan.max_time is None:
            return  # a set without a max_time never gets one
        self.max_time = heard
        self.reporter.log(f"the set's max_time is now {heard:g} s")

    # -- per recipe -----------------------------------------------------------

    def _provision(self, r: _Recipe) -> None:
        assert r.backend is not None
        r.touched = True
        self.reporter.recipe_state(r.plan.id, RecipeState.INSTALLING)
        self.reporter.log(f"{r.label}: provisioning")
        workspace = Workspace(
            r.log_dir, self.workspace_dir, self.plan.ref_commit, provision=r.plan.provision
        )
        try:
            r.backend.provision(r.plan.system, workspace, cancel_event=self.stop)
        except Exception as exc:
            if self.stop.is_set():
                self.reporter.log(f"{r.label}: provisioning stopped: {exc}")
                return
            r.reason = f"provisioning failed: {exc}"
            self._request_stop(StopKind.ABORT, f"{r.label}: {r.reason}")
            return
        for g in r.guests:
            if not self._make_guest(r, g):
                return

    def _make_guest(self, r: _Recipe, g: _Guest) -> bool:
        """Create one guest of a provisioned system (the lab's guest hook); False: stop."""
        assert r.backend is not None
        if self.stop.is_set():
            return False
        name = g.plan.system.fqdn
        self.reporter.log(f"{r.label}: creating guest {name}")
        g.made = True
        workspace = Workspace(g.log_dir, self.workspace_dir, self.plan.ref_commit)
        try:
            r.backend.provision(g.plan.system, workspace, cancel_event=self.stop)
        except Exception as exc:
            if self.stop.is_set():
                self.reporter.log(f"{r.label}: creating guest {name} stopped: {exc}")
                return False
            r.reason = f"guest {name} could not be created: {exc}"
            self._request_stop(StopKind.ABORT, f"{r.label}: {r.reason}")
            return False
        return True

    def _run_recipe(self, r: _Recipe) -> None:
        """The recipe's tasks, and each guest's at the same time (the guests exist now)."""
        assert r.backend is not None
        self.reporter.recipe_state(r.plan.id, RecipeState.RUNNING)
        roles = role_members(self.plan)
        done: list[bool] = []

        def guest(g: _Guest) -> None:
            # as _guarded does for a recipe: an internal error aborts, never vanishes
            self._guarded(
                lambda _r: done.append(self._run_tasks(r, g.place, g.plan.tasks, roles)), r
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
            own = self._run_tasks(r, r.place, r.plan.tasks, roles, stepped=True)
        finally:
            self.steps.leave(r.plan.id)  # its partners must not wait for steps it will not run
        for t in threads:
            t.join()
        r.finished = own and len(done) == len(threads) and all(done)

    def _run_tasks(
        self,
        r: _Recipe,
        place: _Place,
        tasks: tuple[TaskPlan, ...],
        roles: dict[str, list[str]],
        *,
        stepped: bool = False,
    ) -> bool:
        """Run tasks in order at one place; True when every one ran to its end.

        ``stepped``: the recipe's own tasks, each waiting for its step of the set's one
        ordered task list (a guest's tasks have no steps)."""
        for task in tasks:
            if self.stop.is_set():
                return False
            if stepped and not self.steps.wait(task.step, self.stop):
                return False
            outcome, abort = self._run_task(r, task, roles, place)
            r.tasks.append(outcome)
            if abort is not None:
                with self._stop_lock:
                    if r.reason is None:
                        r.reason = abort
                self._request_stop(StopKind.ABORT, f"{r.label}: {abort}")
                return False  # the set stops before leave() lets a partner's next step go
            if outcome.stopped:
                return False
            if stepped:
                self.steps.done(r.plan.id, task.step)
        return True

    def _run_task(
        self, r: _Recipe, task: TaskPlan, roles: dict[str, list[str]], place: _Place
    ) -> tuple[TaskOutcome, str | None]:
        """Run one task; the outcome, and the reason to abort the recipe if it must."""
        assert r.backend is not None
        log_path = place.log_dir / task_log_name(task.id, self.reporter.mask(task.name))
        what = f"task {task.id} ({task.name})"
        if place.guest is not None:
            what += f" on guest {place.system.fqdn}"
        self.reporter.task_started(task.id)
        start = self.clock()

        def done(result: Result, code: int | None, message: str, **flags: bool) -> TaskOutcome:
            with MaskedLog(log_path, self.plan.secrets) as log:
                log.line(f"== {stamp()} {result.value}: {message}")
            self.reporter.task_finished(task.id, code, result, log_path, message)
            return TaskOutcome(
                task.id, result, code, message, log_path, duration=self.clock() - start, **flags
            )

        with MaskedLog(log_path, self.plan.secrets) as log:
            if task.command is not None:
                shown = task.command
            elif task.fetch_url is not None:
                shown = f"fetched task {task.name} from {task.fetch_url}"
            else:
                shown = f"named task {task.name}"
            log.line(f"== {stamp()} {what} on {place.system.fqdn}: {shown}")
        command: list[str] | str
        cwd: str | None = None
        timeout = task.timeout
        try:
            env = task_environment(
                self.plan, r.plan, task, roles, system=place.system, role=place.role
            )
            if task.fetch_url is not None:
                try:
                    command, cwd, timeout = self._fetched(r, task, place, env, log_path)
                except (FetchError, TaskDirError) as exc:
                    return done(Result.FAIL, None, str(exc)), f"{what}: {exc}"
            elif task.command is None:
                rel = task_path(task.name)
                found = r.backend.locate_task(place.system, str(rel))
                if found is None:
                    return done(
                        Result.WARN, None, f"no command and no {rel} in the workspace"
                    ), None
                command = [found]
            else:
                command = task.command
            outcome = r.backend.run(
                place.system,
                command,
                env=env,
                cwd=cwd,
                timeout=timeout,
                log_path=log_path,
                cancel_event=self.stop,
                secrets=self.plan.secrets,
            )
        except PlanError as exc:
            return done(Result.WARN, None, str(exc)), None
        except Exception as exc:
            message = f"could not run: {exc}"
            return done(Result.FAIL, None, message), f"{what} {message}"
        if outcome.timed_out:
            assert timeout is not None
            message = f"timed out after {timeout:g} s; its processes were killed"
            abort = f"{what} exceeded its timeout of {timeout:g} s"
            return done(Result.FAIL, outcome.exit_code, message, timed_out=True), abort
        if outcome.cancelled:
            if self.stop_kind is StopKind.CANCEL:
                return done(Result.WARN, outcome.exit_code, "cancelled", stopped=True), None
            message = f"killed: {self.stop_reason}"
            return done(Result.FAIL, outcome.exit_code, message, stopped=True), None
        result, message = judge_exit(outcome.exit_code)
        return done(result, outcome.exit_code, message), None

    def _fetched(
        self, r: _Recipe, task: TaskPlan, place: _Place, env: dict[str, str], log_path: Path
    ) -> tuple[list[str], str, float | None]:
        """Fetch a task into the workspace: its command, directory and timeout (the job's,
        else a RSTRNT_MAX_TIME parameter's, else its metadata's max_time)."""
        assert r.backend is not None
        assert task.fetch_url is not None
        fetched = fetch_task(task.fetch_url, task.fetch_subdir, self.fetch)
        how = read_task_dir(fetched.directory)
        rel = f"{FETCHED_DIR}/{task.id}"
        r.backend.put_task(place.system, fetched.directory, rel)
        taken = [*role_members(self.plan), *self.plan.env]
        check_names(how.environment, what="metadata environment variable", taken=taken)
        env.update({k: v for k, v in how.environment.items() if k not in task.params})
        env.setdefault("TEST", how.name or task.name)
        env.setdefault("RSTRNT_TASKNAME", how.name or task.name)
        timeout = task.timeout
        override = next((str(task.params[p]) for p in MAX_TIME_PARAMS if p in task.params), None)
        if timeout is None and override is not None:
            timeout = parse_time(override)
        if timeout is None:
            timeout = how.max_time
        with MaskedLog(log_path, self.plan.secrets) as log:
            commit = f" at commit {fetched.commit}" if fetched.commit else ""
            log.line(f"== fetched from {fetched.url}{commit} into $LABQ_WORKSPACE/{rel}")
            if how.name and how.name != task.name:
                log.line(f"== the task calls itself {how.name} (its metadata)")
            if how.dependencies:
                log.line(f"== dependencies (not installed by labq): {' '.join(how.dependencies)}")
            limit = "none" if timeout is None else f"{timeout:g} s"
            log.line(f"== running {shlex.join(how.command)} (timeout {limit})")
        return list(how.command), rel, timeout

    def _archive(self, r: _Recipe) -> None:
        """Collect the system's logs, and each guest's, then destroy the guests."""
        assert r.backend is not None
        try:
            r.backend.collect_logs(r.plan.system, r.log_dir / "collected")
            mask_tree(r.log_dir / "collected", self.plan.secrets)
        except Exception as exc:
            r.logs_error = f"collecting logs failed: {exc}"
            self.reporter.log(f"{r.label}: {r.logs_error}")
        for g in r.guests:
            if g.made:
                self._end_guest(r, g)

    def _end_guest(self, r: _Recipe, g: _Guest) -> None:
        assert r.backend is not None
        name = g.plan.system.fqdn
        try:
            r.backend.collect_logs(g.plan.system, g.log_dir / "collected")
            mask_tree(g.log_dir / "collected", self.plan.secrets)
        except Exception as exc:
            r.logs_error = f"collecting the logs of guest {name} failed: {exc}"
            self.reporter.log(f"{r.label}: {r.logs_error}")
        self.reporter.log(f"{r.label}: destroying guest {name}")
        try:
            r.backend.cleanup(g.plan.system, log_dir=g.log_dir)
        except Exception as exc:
            r.cleanup_error = f"destroying guest {name} failed: {exc}"
            self.reporter.log(f"{r.label}: {r.cleanup_error}")

    def _cleanup(self, r: _Recipe) -> None:
        assert r.backend is not None
        state, _ = self._final_state(r)
        if state is RecipeState.COMPLETED and all(t.result is not Result.FAIL for t in r.tasks):
            return
        self.reporter.log(f"{r.label}: cleaning up")
        try:
            r.backend.cleanup(r.plan.system, log_dir=r.log_dir)
            r.cleaned_up = True
        except Exception as exc:
            r.cleanup_error = f"clean-up failed: {exc}"
            self.reporter.log(f"{r.label}: {r.cleanup_error}")

    # -- the end ------------------------------------------------------------

    def _final_state(self, r: _Recipe) -> tuple[RecipeState, str | None]:
        if r.reason is not None:
            return RecipeState.ABORTED, r.reason
        if r.finished:
            return RecipeState.COMPLETED, None
        if self.stop_kind is StopKind.CANCEL:
            return RecipeState.CANCELLED, self.stop_reason
        if self.stop_kind is StopKind.MAX_TIME:
            return RecipeState.ABORTED, self.stop_reason
        return RecipeState.ABORTED, f"aborted with its recipe set: {self.stop_reason}"

    def _finish(self) -> SetOutcome:
        outcomes = []
        for r in self.recipes:
            state, reason = self._final_state(r)
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
            if self.stop_kind is not StopKind.LOST:
                self.reporter.recipe_state(r.plan.id, state, reason)
        outcome = SetOutcome(self.plan.id, tuple(outcomes), self.dir, self.reporter.errors())
        result = outcome.result.value if outcome.result else "none"
        self.reporter.log(f"set {self.plan.id} ends {outcome.state.value}, result {result}")
        return outcome
