"""The server's half of a lab agent's work: claims, reports, ends and locks, in the database.

What :class:`~labq.dispatch.database_reporter.DatabaseReporter` does for a
supervisor of the server's own, done here for one running beside a lab agent,
from the reports the agent forwards over HTTP (``docs/operations.md``, Lab
agents). Every write is guarded by the set's claim *and* the agent that took
it, so an agent can act only on sets it claimed, and a set the server has ended
(its heartbeat went quiet, a cancel) takes nothing more from anyone.

Reports are numbered per set; the database keeps the last number applied, so a
report the agent sends again after a lost answer applies once. A report the
database refuses (a task of a recipe that already ended) is written to the
server's log and counted as applied: sending it again would not change that.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any, Final

from sqlalchemy import Engine

from labq.dispatch.database_reporter import task_status
from labq.dispatch.logs import set_log_dir
from labq.dispatch.planwire import plan_to_json
from labq.dispatch.setplans import load_plan
from labq.domain.contention import LockNeeds
from labq.domain.locktable import Outcome, declared_grants
from labq.domain.states import RecipeState, Result, worst_result
from labq.domain.stops import QUIET, stopped_state, supervisor_ended
from labq.errors import ClaimLost, InputError, LabqError
from labq.store import Repository, reading, transaction
from labq.store.agents import AgentView

log = logging.getLogger("labq.agents")
MAX_EVENTS: Final = 1000  # reports in one call


@dataclass(frozen=True)
class Work:
    """A set an agent claimed: what its supervisor needs to run it."""

    set_id: int
    claim: str
    lab: str
    plan: dict[str, Any]
    token: str  # the set's own API token, for its tasks (LABQ_TOKEN)

    def as_json(self) -> dict[str, Any]:
        """The claim answer's entry for this set."""
        return {
            "set": self.set_id,
            "claim": self.claim,
            "lab": self.lab,
            "plan": self.plan,
            "env": {"LABQ_TOKEN": self.token},
        }


def claim_work(
    engine: Engine,
    agent: AgentView,
    *,
    limit: int,
    now: datetime,
    labs: set[str] | None = None,
) -> list[Work]:
    """Claim up to ``limit`` started sets of the agent's labs (of those in ``labs`` only, when
    given), each in its own transaction: the claim, its recipes ``scheduled → waiting``, the
    plan and the set's token."""
    wanted = [lab for lab in agent.labs if labs is None or lab in labs]
    with reading(engine) as repo:
        candidates = repo.agents.claimable_sets(wanted, limit=limit)
    out: list[Work] = []
    for set_id, claim in candidates:
        try:
            with transaction(engine) as repo:
                if not repo.agents.claim_for_agent(set_id, claim, agent, now=now):
                    continue  # another agent (or the server) was first
                out.append(_take_up(repo, set_id, claim, agent, now))
        except LabqError as exc:  # it cannot run: left claimable, its heartbeat will go quiet
            log.warning("set %s cannot be given to agent %s: %s", set_id, agent.name, exc)
    return out


def _take_up(repo: Repository, set_id: int, claim: str, agent: AgentView, now: datetime) -> Work:
    plan = load_plan(repo, set_id)
    for recipe in plan.recipes:
        repo.moves.move_recipe(recipe.id, RecipeState.WAITING, now=now)
    owner = repo.jobs.load_job(plan.job_id).owner
    _id, token = repo.tokens.create_token(
        owner, f"recipe set {set_id}", now=now, recipe_set=set_id, actor=f"agent {agent.name}"
    )
    lab = plan.recipes[0].system.lab if plan.recipes else ""
    return Work(set_id, claim, lab, plan_to_json(plan), token)


# --- reports --------------------------------------------------------------------------


def apply_reports(
    engine: Engine,
    agent: AgentView,
    set_id: int,
    claim: str,
    events: Sequence[Mapping[str, Any]],
    *,
    now: datetime,
    data_dir: Path,
) -> int:
    """Apply the numbered reports after the last one applied, in order, in one transaction
    guarded by the claim; the number of the last applied. :class:`ClaimLost` when the set
    is not (or no longer) the agent's; :class:`InputError` for a malformed report."""
    if len(events) > MAX_EVENTS:
        raise InputError(f"at most {MAX_EVENTS} reports in one call", place="events")
    ordered = sorted(events, key=lambda e: _int(e, "seq"))
    with transaction(engine) as repo:
        repo.agents.guard_agent_claim(set_id, claim, agent.id)
        seq = repo.agents.report_seq(set_id)
        context = repo.agents.report_context(set_id)
        started = context.started_at or now
        recipes, tasks = context.recipes, context.tasks
        root = set_log_dir(data_dir, set_id)
        for event in ordered:
            number = _int(event, "seq")
            if number <= seq:
                continue  # applied before: its answer was lost
            if number != seq + 1:
                break  # a gap: the missing ones first
            at = min(max(_time(event, started), started), now)
            try:
                _apply(repo, set_id, event, at, recipes, tasks, root)
            except (ClaimLost, InputError):
                raise
            except LabqError as exc:
                log.warning("set %s: report %d refused: %s", set_id, number, exc)
            seq = number
        repo.agents.set_report_seq(set_id, seq)
    return seq


def _apply(
    repo: Repository,
    set_id: int,
    event: Mapping[str, Any],
    at: datetime,
    recipes: Mapping[int, str | None],
    tasks: frozenset[int],
    root: Path,
) -> None:
    kind = event.get("kind")
    if kind == "recipe":
        recipe = _int(event, "recipe")
        if recipe not in recipes:
            raise InputError(f"recipe {recipe} is not in set {set_id}", place="recipe")
        state = _enum(RecipeState, event, "state")
        _recipe_state(repo, set_id, recipe, recipes[recipe], state, event.get("reason"), at, root)
    elif kind in ("task_started", "task_finished"):
        task = _int(event, "task")
        if task not in tasks:
            raise InputError(f"task {task} is not in set {set_id}", place="task")
        if kind == "task_started":
            repo.reports.start_task(task, now=at)
            return
        result = _enum(Result, event, "result")
        message = str(event.get("message") or "")
        code = event.get("exit_code")
        repo.reports.finish_task(
            task,
            now=at,
            status=task_status(result, message),
            result=result,
            exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
            log_path=str(root / relative_log(str(event.get("log") or ""))),
            message=message,
        )
    else:
        raise InputError(f"unknown report kind {kind!r}", place="kind")


def _recipe_state(
    repo: Repository,
    set_id: int,
    recipe: int,
    fqdn: str | None,
    state: RecipeState,
    reason: object,
    at: datetime,
    root: Path,
) -> None:
    """As :meth:`DatabaseReporter.recipe_state`: the log directory on waiting, the result
    (the worst of its tasks', at least warn when it did not complete) on a final move."""
    text = None if reason is None else str(reason)[:2000]
    if state is RecipeState.WAITING and fqdn is not None:
        repo.reports.set_log_dir(recipe, str(root / relative_log(fqdn)))
    if state.is_final:
        stored = repo.agents.task_results(recipe)
        results: list[Result | None] = [Result(r) for r in stored if r is not None]
        if state is not RecipeState.COMPLETED:
            results.append(Result.WARN)
        repo.reports.set_recipe_result(recipe, worst_result(results))
    if state is RecipeState.CANCELLED:
        stop = repo.agents.stop_reason(set_id)
        text = stop or text
        state = RecipeState.CANCELLED if stop is None else stopped_state(stop)
    repo.moves.move_recipe(recipe, state, now=at, reason=text)


def relative_log(path: str) -> PurePosixPath:
    """A log path relative to a set's log directory, refused if it could step outside it."""
    rel = PurePosixPath(path)
    if (
        not path
        or rel.is_absolute()
        or any(part in ("", ".", "..") for part in rel.parts)
        or "\0" in path
        or "\\" in path
    ):
        raise InputError(f"{path!r} is not a path inside the set's log directory", place="path")
    return rel


# --- the end, and locks ---------------------------------------------------------------


def end_set(
    engine: Engine, agent: AgentView, set_id: int, claim: str, code: int | None, *, now: datetime
) -> bool:
    """The agent's supervisor of the set exited and every report got through: recipes it left
    unfinished end aborted (cancelled after a stop), and the set is no longer the agent's to
    beat for. False when the set is not the agent's under this claim."""
    with transaction(engine) as repo:
        if not repo.agents.agent_set_exited(set_id, claim, agent.id):
            return False
        view = repo.jobs.get_recipe_set(set_id)
        cancelled = view.stop_reason is not None and view.stop_reason != QUIET
        if cancelled:
            state, reason = stopped_state(str(view.stop_reason)), str(view.stop_reason)
        else:
            state = RecipeState.ABORTED
            reason = supervisor_ended(code)
        for recipe in view.recipes:
            if not recipe.state.is_final:
                repo.moves.move_recipe(recipe.id, state, now=now, reason=reason)
    return True


def take_locks(
    engine: Engine, agent: AgentView, set_id: int, claim: str, *, now: datetime
) -> Outcome:
    """The set's declared locks (and its lab's), all or none: granted, or what it waits for."""
    with transaction(engine) as repo:
        repo.agents.guard_agent_claim(set_id, claim, agent.id)
        view = repo.jobs.get_recipe_set(set_id)
        assert view.lab is not None, "a claimed set has started in a lab"
        grants = declared_grants(LockNeeds.of(view.spec.locks), view.lab)
        return repo.locks.acquire_locks(set_id, grants, now=now)


# --- reading reports ------------------------------------------------------------------


def _int(event: Mapping[str, Any], key: str) -> int:
    value = event.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise InputError(f"{key} must be a whole number, not {value!r}", place=key)
    return value


def _enum(kind: Any, event: Mapping[str, Any], key: str) -> Any:
    try:
        return kind(event.get(key))
    except ValueError:
        raise InputError(f"{event.get(key)!r} is not a {key}", place=key) from None


def _time(event: Mapping[str, Any], default: datetime) -> datetime:
    raw = event.get("at")
    if not isinstance(raw, str):
        return default
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        raise InputError(f"{raw!r} is not an ISO 8601 time", place="at") from None
    return parsed if parsed.tzinfo is not None else default
