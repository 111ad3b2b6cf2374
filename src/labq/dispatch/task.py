"""Running one task at one place (a recipe's system or a guest) and saying how it ended.

Its log begins with what runs and ends with how it ended; the reporter hears it
started and finished. A task that cannot run at all never raises: it ends
``Warn`` (a plan that cannot be run as given, a named task the workspace does
not hold) or ``Fail``, and a fetch that failed, a task that could not be
started or one that exceeded its timeout also aborts its recipe
(:attr:`TaskEnd.abort`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from labq.dispatch.backends import Backend
from labq.dispatch.environment import check_names, role_members, task_environment
from labq.dispatch.fetch import FetchError, fetch_task
from labq.dispatch.logs import MaskedLog, stamp, task_log_name
from labq.dispatch.plan import PlanError, TaskPlan, task_path
from labq.dispatch.procs import Outcome as RunOutcome
from labq.dispatch.recipes import Place, RecipeRun
from labq.dispatch.results import TaskOutcome, judge_exit
from labq.dispatch.setcontext import Checkout, SetContext
from labq.dispatch.stopping import Stop, StopKind
from labq.dispatch.taskdir import MAX_TIME_PARAMS, TaskDirError, parse_time, read_task_dir
from labq.domain.states import Result

FETCHED_DIR: Final = "fetched"  # fetched tasks go to <workspace>/fetched/<task id>


@dataclass(frozen=True)
class TaskEnd:
    """How a task ended, and why its recipe must abort (None: it need not)."""

    outcome: TaskOutcome
    abort: str | None = None


@dataclass(frozen=True)
class _Ending:
    """How a task ended, before it is written down and reported."""

    result: Result
    message: str
    code: int | None = None
    abort: str | None = None
    timed_out: bool = False
    stopped: bool = False


@dataclass(frozen=True)
class _Command:
    """What to run for a task, where (relative to the workspace) and for how long."""

    command: list[str] | str
    cwd: str | None
    timeout: float | None


class TaskRunner:
    """Runs the tasks of one set, one call of :meth:`run` per task (from any thread)."""

    def __init__(self, context: SetContext, stop: Stop, checkout: Checkout) -> None:
        self.context = context
        self.stop = stop
        self.plan = checkout.plan
        self.roles = role_members(checkout.plan)

    def run(self, r: RecipeRun, task: TaskPlan, place: Place) -> TaskEnd:
        """Run ``task`` of ``r`` at ``place``; how it ended."""
        reporter = self.context.reporter
        log_path = place.log_dir / task_log_name(task.id, reporter.mask(task.name))
        what = f"task {task.id} ({task.name})"
        if place.guest is not None:
            what += f" on guest {place.system.fqdn}"
        reporter.task_started(task.id)
        start = self.context.clock()
        self._write(log_path, f"== {stamp()} {what} on {place.system.fqdn}: {_shown(task)}")
        end = self._attempt(r, task, place, what, log_path)
        self._write(log_path, f"== {stamp()} {end.result.value}: {end.message}")
        reporter.task_finished(task.id, end.code, end.result, log_path, end.message)
        duration = self.context.clock() - start
        outcome = TaskOutcome(
            task.id,
            end.result,
            end.code,
            end.message,
            log_path,
            timed_out=end.timed_out,
            stopped=end.stopped,
            duration=duration,
        )
        return TaskEnd(outcome, end.abort)

    def _attempt(
        self, r: RecipeRun, task: TaskPlan, place: Place, what: str, log_path: Path
    ) -> _Ending:
        assert r.backend is not None
        try:
            env = task_environment(
                self.plan, r.plan, task, self.roles, system=place.system, role=place.role
            )
            how = self._command(r.backend, task, place, env, what, log_path)
            if isinstance(how, _Ending):
                return how
            ran = r.backend.run(
                place.system,
                how.command,
                env=env,
                cwd=how.cwd,
                timeout=how.timeout,
                log_path=log_path,
                cancel_event=self.stop.event,
                secrets=self.plan.secrets,
            )
        except PlanError as exc:
            return _Ending(Result.WARN, str(exc))
        except Exception as exc:
            message = f"could not run: {exc}"
            return _Ending(Result.FAIL, message, abort=f"{what} {message}")
        return self._judge(ran, how.timeout, what)

    def _command(
        self,
        backend: Backend,
        task: TaskPlan,
        place: Place,
        env: dict[str, str],
        what: str,
        log_path: Path,
    ) -> _Command | _Ending:
        """What runs for ``task`` — or how it ended when there is nothing to run."""
        if task.fetch_url is not None:
            try:
                return self._fetched(backend, task, place, env, log_path)
            except (FetchError, TaskDirError) as exc:
                return _Ending(Result.FAIL, str(exc), abort=f"{what}: {exc}")
        if task.command is not None:
            return _Command(task.command, None, task.timeout)
        rel = task_path(task.name)
        found = backend.locate_task(place.system, str(rel))
        if found is None:
            return _Ending(Result.WARN, f"no command and no {rel} in the workspace")
        return _Command([found], None, task.timeout)

    def _judge(self, ran: RunOutcome, timeout: float | None, what: str) -> _Ending:
        """How a task that ran ended: timed out, stopped with the set, or by its exit."""
        if ran.timed_out:
            assert timeout is not None
            message = f"timed out after {timeout:g} s; its processes were killed"
            abort = f"{what} exceeded its timeout of {timeout:g} s"
            return _Ending(Result.FAIL, message, ran.exit_code, abort, timed_out=True)
        if ran.cancelled:
            if self.stop.kind is StopKind.CANCEL:
                return _Ending(Result.WARN, "cancelled", ran.exit_code, stopped=True)
            message = f"killed: {self.stop.reason}"
            return _Ending(Result.FAIL, message, ran.exit_code, stopped=True)
        result, message = judge_exit(ran.exit_code)
        return _Ending(result, message, ran.exit_code)

    def _fetched(
        self, backend: Backend, task: TaskPlan, place: Place, env: dict[str, str], log_path: Path
    ) -> _Command:
        """Fetch a task into the workspace: its command, directory and timeout (the job's,
        else a RSTRNT_MAX_TIME parameter's, else its metadata's max_time)."""
        assert task.fetch_url is not None
        fetched = fetch_task(task.fetch_url, task.fetch_subdir, self.context.fetch)
        how = read_task_dir(fetched.directory)
        rel = f"{FETCHED_DIR}/{task.id}"
        backend.put_task(place.system, fetched.directory, rel)
        taken = [*self.roles, *self.plan.env]
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
        return _Command(list(how.command), rel, timeout)

    def _write(self, log_path: Path, line: str) -> None:
        with MaskedLog(log_path, self.plan.secrets) as log:
            log.line(line)


def _shown(task: TaskPlan) -> str:
    """What the head of a task's log says runs."""
    if task.command is not None:
        return task.command
    if task.fetch_url is not None:
        return f"fetched task {task.name} from {task.fetch_url}"
    return f"named task {task.name}"
