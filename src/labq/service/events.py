"""What the scheduler thread does for each event: one table from event type to handler.

Each event is handled in one transaction. A handler feeds the event to the core,
writes what it decides (committed with the event), and returns an
:class:`~labq.service.outcome.Outcome` (the actions to take after the commit, a
fresh core, when to wake next) for the loop to apply; it never touches the
service itself, and no handler imports the loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, TypeVar

from labq.config import Settings
from labq.domain.events import (
    AccessChanged,
    ConditionChanged,
    DistrosChanged,
    FiltersChanged,
    JobsCancelled,
    JobSubmitted,
    LocksChanged,
    PauseChanged,
    PriorityChanged,
    ReservationChanged,
    SetEnded,
    SystemAdded,
)
from labq.domain.states import Condition, RecipeState
from labq.domain.stops import QUIET, stopped_state, supervisor_ended
from labq.scheduler.core import Scheduler
from labq.service import bridge, eligibility, repair, reservations
from labq.service.actions import Actions
from labq.service.inbox import ConsistencyDue, Handled, Submissions, SupervisorExited, TimerDue
from labq.service.outcome import Outcome, Wake
from labq.store import Repository, epoch
from labq.store.agents import AGENT_HOST
from labq.store.views import RecipeSetView, RecipeView

log = logging.getLogger("labq.scheduler")

E = TypeVar("E")


@dataclass(frozen=True)
class Context:
    """What handlers read of the service: its settings and the dispatcher's running sets."""

    settings: Settings
    running: Callable[[], list[int]]  # the sets whose supervisors this server watches


Handler = Callable[[Context, Repository, Scheduler, E, datetime], Outcome]


@dataclass(frozen=True)
class Route:
    """An event type's handler, and whether the event may have ended a job (then the
    dependents of ended jobs are settled after it; other events skip that query)."""

    handle: Handler[Any]
    ends_jobs: bool


# --- the API's events --------------------------------------------------------------


def _submitted(
    context: Context, repo: Repository, core: Scheduler, event: Submissions, now: datetime
) -> Outcome:
    return Outcome(bridge.submit_jobs(repo, core, event.jobs, now=now))


def _one_submitted(
    context: Context, repo: Repository, core: Scheduler, event: JobSubmitted, now: datetime
) -> Outcome:
    return _submitted(context, repo, core, Submissions((event.job_id,)), now)


def _cancelled(
    context: Context, repo: Repository, core: Scheduler, event: JobsCancelled, now: datetime
) -> Outcome:
    ids = [s.id for s in core.sets.values() if s.job == event.job_id and not s.finished]
    return Outcome(bridge.settle(repo, core, core.cancel(ids, epoch(now)), now=now))


def _priority_changed(
    context: Context, repo: Repository, core: Scheduler, event: PriorityChanged, now: datetime
) -> Outcome:
    return Outcome(_priority(repo, core, event.job_id, now))


def _system_added(
    context: Context, repo: Repository, core: Scheduler, event: SystemAdded, now: datetime
) -> Outcome:
    if event.fqdn in core.systems:  # told twice (direct call and NOTIFY, a rebuild)
        return Outcome()
    entry = bridge.system_entry(repo.systems.get_system(event.fqdn))
    return Outcome(bridge.settle(repo, core, core.add_system(entry, epoch(now)), now=now))


def _condition_changed(
    context: Context, repo: Repository, core: Scheduler, event: ConditionChanged, now: datetime
) -> Outcome:
    at = epoch(now)
    system = repo.systems.get_system(event.fqdn)
    if system.fqdn not in core.systems:  # its system-added event was lost
        entry = bridge.system_entry(system)
        return Outcome(bridge.settle(repo, core, core.add_system(entry, at), now=now))
    if core.systems[system.fqdn].condition is system.condition:
        return Outcome()
    decisions = core.change_condition(system.fqdn, system.condition, at)
    return Outcome(bridge.settle(repo, core, decisions, now=now))


def _access_changed(
    context: Context, repo: Repository, core: Scheduler, event: AccessChanged, now: datetime
) -> Outcome:
    # pools and inventories change systems' facts and the classes they meet: rebuild (rare)
    fresh = bridge.rebuild(repo, context.settings.scheduler())
    free = sorted(f for systems in fresh.free.values() for f in systems)
    return Outcome(bridge.settle(repo, fresh, fresh.offer(free, epoch(now)), now=now), core=fresh)


def _distros_changed(
    context: Context, repo: Repository, core: Scheduler, event: DistrosChanged, now: datetime
) -> Outcome:
    # the lab's trees now: holds that can no longer complete are given back; a recipe no lab
    # can serve any more is aborted by the next consistency pass (docs/scheduling.md)
    trees = bridge.trees_by_lab(repo, event.lab)[event.lab]
    decisions = core.set_trees(event.lab, trees, epoch(now))
    return Outcome(bridge.settle(repo, core, decisions, now=now))


def _locks_changed(
    context: Context, repo: Repository, core: Scheduler, event: LocksChanged, now: datetime
) -> Outcome:
    return Outcome(locks_changed(repo, core, [event.set_id], now))


def _filters_changed(
    context: Context, repo: Repository, core: Scheduler, event: FiltersChanged, now: datetime
) -> Outcome:
    return Outcome(eligibility.filters_changed(repo, core, now))


def _pause_changed(
    context: Context, repo: Repository, core: Scheduler, event: PauseChanged, now: datetime
) -> Outcome:
    return eligibility.pause_changed(repo, core, event.lab, now)


def _reservation_changed(
    context: Context, repo: Repository, core: Scheduler, event: ReservationChanged, now: datetime
) -> Outcome:
    actions = reservations.changed(repo, core, event.fqdn, now)
    return Outcome(actions, wake=Wake(reservations.next_wake(repo)))


def _set_ended(
    context: Context, repo: Repository, core: Scheduler, event: SetEnded, now: datetime
) -> Outcome:
    return Outcome(agent_ended(context, repo, core, event.set_id, now))


# --- the service's own ---------------------------------------------------------------


def _supervisor_exited(
    context: Context, repo: Repository, core: Scheduler, event: SupervisorExited, now: datetime
) -> Outcome:
    return Outcome(finished(context, repo, core, event.set_id, event.code, event.claim, now))


def _timer_due(
    context: Context, repo: Repository, core: Scheduler, event: TimerDue, now: datetime
) -> Outcome:
    return Outcome()  # a pause ran out: the follow-up after every event ends it


def _priority(repo: Repository, core: Scheduler, job_id: int, now: datetime) -> Actions:
    out: Actions = []
    for entry in [s for s in core.sets.values() if s.job == job_id and s.waiting]:
        priority = repo.jobs.get_recipe_set(entry.id).spec.priority
        if priority is not entry.priority:
            decisions = core.change_priority([entry.id], priority, epoch(now))
            out += bridge.settle(repo, core, decisions, now=now)
    return out


def locks_changed(repo: Repository, core: Scheduler, set_ids: list[int], now: datetime) -> Actions:
    """Running sets' locks changed: the core weighs queued sets against what they hold now.

    A set that holds no lock yet counts by its declaration.
    """
    held = repo.locks.held_locks(set_ids)
    decisions = [d for s in set_ids for d in core.locks_held(s, held.get(s), epoch(now))]
    return bridge.settle(repo, core, decisions, now=now)


def finished(
    context: Context,
    repo: Repository,
    core: Scheduler,
    set_id: int,
    code: int | None,
    claim: str,
    now: datetime,
) -> Actions:
    """A supervisor exited: recipes it left unfinished are aborted, then the set ends.

    Only the supervisor that holds the set's claim speaks for it: one that lost
    the claim (a second launch, an abandoned one) ended without touching anything.
    """
    entry = core.sets.get(set_id)
    if entry is None or entry.finished:
        return []
    if repo.supervisors.claim_of(set_id) != claim:
        return []
    view = repo.jobs.get_recipe_set(set_id)
    if view.stop_reason == QUIET:
        gone = QUIET  # the server killed it for that
    elif code is None:
        gone = "the supervisor was gone when the server looked"
    else:
        gone = supervisor_ended(code)
    outcomes, reason = _left_unfinished(view, gone)
    out = bridge.finish(repo, core, set_id, now=now, outcomes=outcomes, reason=reason)
    return out + _mark_broken(context, repo, core, view.recipes, now)


def agent_ended(
    context: Context, repo: Repository, core: Scheduler, set_id: int, now: datetime
) -> Actions:
    """A lab agent's supervisor exited and the agent ended every recipe it left (the API did,
    under the claim): the core hears the set's end now instead of at the next pass."""
    entry = core.sets.get(set_id)
    if entry is None or entry.finished or not entry.started:
        return []
    view = repo.jobs.get_recipe_set(set_id)
    if view.supervisor_host is None or not view.supervisor_host.startswith(AGENT_HOST):
        return []  # a supervisor of ours: its exit comes from the dispatcher
    if not all(r.state.is_final for r in view.recipes):
        return []
    out = bridge.finish(repo, core, set_id, now=now)
    return out + _mark_broken(context, repo, core, view.recipes, now)


def _left_unfinished(view: RecipeSetView, why: str) -> tuple[dict[int, RecipeState], str]:
    """How the recipes a supervisor left unfinished end, and why.

    Aborted (and maybe retried), unless the set had been asked to stop (a cancel):
    then they end cancelled, with the cancel's reason.
    """
    cancelled = view.stop_reason is not None and view.stop_reason != QUIET
    end, reason = (
        (stopped_state(str(view.stop_reason)), str(view.stop_reason))
        if cancelled
        else (RecipeState.ABORTED, why)
    )
    return {r.id: end for r in view.recipes if not r.state.is_final}, reason


def _mark_broken(
    context: Context,
    repo: Repository,
    core: Scheduler,
    recipes: tuple[RecipeView, ...],
    now: datetime,
) -> Actions:
    """A system that aborted ``health.max_consecutive_aborts`` sets in a row is broken."""
    limit = context.settings.health.max_consecutive_aborts
    out: Actions = []
    for fqdn in sorted({r.system for r in recipes if r.system is not None}):
        count = repo.systems.consecutive_aborts(fqdn)
        if count >= limit and repo.systems.get_system(fqdn).condition is Condition.AUTOMATED:
            reason = f"aborted {count} recipe sets in a row"
            repo.systems.set_condition(
                fqdn, Condition.BROKEN, now=now, actor="scheduler", reason=reason
            )
            decisions = core.change_condition(fqdn, Condition.BROKEN, epoch(now))
            out += bridge.settle(repo, core, decisions, now=now)
    return out


def consistency(
    context: Context, repo: Repository, core: Scheduler, event: ConsistencyDue, now: datetime
) -> Outcome:
    """The slow pass: quiet supervisors, lost launches, then the core's own repairs, locks,
    and the core's memory checked against the database (a fresh core when they differ)."""
    timeout = context.settings.health.heartbeat_timeout
    ours = context.running()
    out, quiet = repair.supervisors(repo, core, timeout=timeout, ours=ours, now=now)
    for set_id in quiet:
        view = repo.jobs.get_recipe_set(set_id)  # before the stop request: was it cancelled?
        outcomes, reason = _left_unfinished(view, QUIET)
        repo.supervisors.request_stop(
            set_id, reason
        )  # recorded, and a supervisor that wakes up stops
        out += bridge.finish(repo, core, set_id, now=now, outcomes=outcomes, reason=reason)
        out += _mark_broken(context, repo, core, view.recipes, now)
    busy_since = now - timedelta(seconds=timeout)
    for set_id in repair.ended_unheard(repo, core, ours, busy_since=busy_since):
        out += bridge.finish(repo, core, set_id, now=now)
    out += bridge.settle(repo, core, core.consistency_pass(epoch(now)), now=now)
    # locks of sets that ended without the release (a crash), and what running sets hold
    repo.locks.release_ended_locks(now=now)
    running = [s.id for s in core.sets.values() if s.started and not s.finished]
    out += locks_changed(repo, core, running, now)
    found = repair.differences(repo, core)
    if found:
        log.warning("the scheduler disagrees with the database: %s", repair.describe(found))
        fresh = bridge.rebuild(repo, context.settings.scheduler())
        free = sorted(f for systems in fresh.free.values() for f in systems)
        out += bridge.settle(repo, fresh, fresh.offer(free, epoch(now)), now=now)
        # events lost between processes (a NOTIFY nobody heard): new sets and pending systems
        return Outcome(out + bridge.resume(repo, fresh, now=now), core=fresh)
    return Outcome(out + bridge.resume(repo, core, now=now))


def _on(kind: type[E], handler: Handler[E], *, ends_jobs: bool = False) -> tuple[type[Any], Route]:
    """One row of :data:`ROUTES` (typed: the handler takes that kind of event)."""
    return kind, Route(handler, ends_jobs)


ROUTES: Final[Mapping[type[Any], Route]] = dict(
    [
        _on(Submissions, _submitted, ends_jobs=True),  # as JobSubmitted events come, gathered
        _on(JobSubmitted, _one_submitted, ends_jobs=True),
        _on(JobsCancelled, _cancelled, ends_jobs=True),
        _on(PriorityChanged, _priority_changed),
        _on(SystemAdded, _system_added),
        _on(ConditionChanged, _condition_changed),
        _on(AccessChanged, _access_changed),
        _on(DistrosChanged, _distros_changed),
        _on(LocksChanged, _locks_changed),
        _on(FiltersChanged, _filters_changed, ends_jobs=True),
        _on(PauseChanged, _pause_changed),
        _on(ReservationChanged, _reservation_changed),
        _on(SetEnded, _set_ended, ends_jobs=True),
        _on(SupervisorExited, _supervisor_exited, ends_jobs=True),
        _on(ConsistencyDue, consistency, ends_jobs=True),
        _on(TimerDue, _timer_due),
    ]
)


def handle(
    context: Context, repo: Repository, core: Scheduler, event: Handled, now: datetime
) -> Outcome:
    """Feed one event to its handler: the core decides, and its decisions are written."""
    return ROUTES[type(event)].handle(context, repo, core, event, now)


def ends_jobs(event: Handled) -> bool:
    """Whether ``event`` may have ended a job (or submitted one whose dependency ended)."""
    return ROUTES[type(event)].ends_jobs


def submitted_jobs(event: Handled) -> tuple[int, ...] | None:
    """The jobs a submission event submitted (their own dependencies may have ended);
    None for any other event."""
    if isinstance(event, Submissions):
        return event.jobs
    return (event.job_id,) if isinstance(event, JobSubmitted) else None
