"""What a run reports: the reporter interface, outcomes, and how results are judged.

Results: exit code 0 is ``pass``; exit code 77 is ``warn`` (the task ran but
could not fully check what it tests, as 77 means "skipped" in the automake test
harness); any other exit code is ``fail``. A task that overran its timeout is
``fail`` and aborts its recipe. A named task missing from the workspace is
``warn``. A task stopped by a cancel is ``warn`` (as in Beaker); one stopped
because the set ran out of time or another recipe aborted is ``fail``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from labq.dispatch.procs import Outcome
from labq.domain.states import RecipeState, Result, derived_state, worst_result

WARN_EXIT: Final = 77


class Reporter(Protocol):
    """Callbacks the supervisor maps onto the database.

    :func:`labq.dispatch.runner.run_set` calls them one at a time (never two at
    once, though from several threads); an exception from one is written to the
    supervisor log and the run goes on.
    """

    def recipe_state(self, recipe_id: int, state: RecipeState, reason: str | None = None) -> None:
        """A recipe moved: waiting → installing → running → completed | aborted | cancelled."""
        ...

    def task_started(self, task_id: int) -> None:
        """A task began."""
        ...

    def task_finished(
        self, task_id: int, exit_code: int | None, result: Result, log_path: Path, message: str
    ) -> None:
        """A task ended (``exit_code`` None: it never ran, or nothing reported one)."""
        ...

    def heartbeat(self) -> float | None:
        """The supervisor is alive; called every ``heartbeat_every`` seconds.

        May answer the set's max_time as it stands now (seconds from when the set
        took its locks): an extension (``labq job extend``) moves the deadline at
        once. None: no news, the deadline stays.
        """
        ...

    def log(self, message: str) -> None:
        """Something worth telling a person happened (secrets already masked)."""
        ...


@dataclass(frozen=True)
class TaskOutcome:
    """How one task ended."""

    task_id: int
    result: Result
    exit_code: int | None
    message: str
    log_path: Path
    timed_out: bool = False
    stopped: bool = False  # ended early by a cancel, max_time, or another recipe's abort
    duration: float = 0.0


@dataclass(frozen=True)
class RecipeOutcome:
    """How one recipe ended: its final state, worst result and what was done after."""

    recipe_id: int
    fqdn: str
    state: RecipeState
    result: Result | None
    reason: str | None
    tasks: tuple[TaskOutcome, ...]
    log_dir: Path
    cleaned_up: bool = False
    cleanup_error: str | None = None
    logs_error: str | None = None


@dataclass(frozen=True)
class SetOutcome:
    """How a recipe set ended."""

    set_id: int
    recipes: tuple[RecipeOutcome, ...]
    log_dir: Path
    reporter_errors: tuple[str, ...] = ()

    @property
    def state(self) -> RecipeState:
        """The set's state, derived from its recipes'."""
        return derived_state(r.state for r in self.recipes)

    @property
    def result(self) -> Result | None:
        """The worst result of any recipe."""
        return worst_result(r.result for r in self.recipes)

    def recipe(self, recipe_id: int) -> RecipeOutcome:
        """One recipe's outcome."""
        return next(r for r in self.recipes if r.recipe_id == recipe_id)


def judge_exit(exit_code: int | None) -> tuple[Result, str]:
    """The result and message of a command that ran to its end."""
    if exit_code == 0:
        return Result.PASS, "exit code 0"
    if exit_code == WARN_EXIT:
        return Result.WARN, f"exit code {WARN_EXIT}: the task reported warn"
    if exit_code is None:
        return Result.FAIL, "ended without an exit code"
    if exit_code < 0:
        return Result.FAIL, f"killed by signal {-exit_code}"
    return Result.FAIL, f"exit code {exit_code}"


def recipe_result(state: RecipeState, tasks: tuple[TaskOutcome, ...]) -> Result | None:
    """The worst task result; a recipe that did not complete is at least ``warn``."""
    results: list[Result | None] = [t.result for t in tasks]
    if state is not RecipeState.COMPLETED:
        results.append(Result.WARN)
    return worst_result(results)


__all__ = [
    "WARN_EXIT",
    "Outcome",
    "RecipeOutcome",
    "Reporter",
    "SetOutcome",
    "TaskOutcome",
    "judge_exit",
    "recipe_result",
]
