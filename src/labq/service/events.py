"""What the scheduler thread does for each kind of event (one transaction each)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from labq.domain.states import Condition, RecipeState
from labq.domain.stops import QUIET, stopped_state, supervisor_ended
from labq.scheduler.core import Scheduler
from labq.service import bridge, eligibility, repair, reservations
from labq.service.actions import Actions
from labq.store import Repository, epoch
from labq.store.agents import AGENT_HOST
from labq.store.views import RecipeSetView, RecipeView

if TYPE_CHECKING:
    from labq.service.loop import Event, SchedulerService

log = logging.getLogger("labq.scheduler")


def decide(
    service: SchedulerService, repo: Repository, core: Scheduler, event: Event, now: datetime
) -> Actions:
    """Feed one event to the core and commit what it decides."""
    at = epoch(now)
    if event.kind == "submit":
        return bridge.submit_jobs(repo, core, event.jobs or (int(event.key or 0),), now=now)
    if event.kind == "cancel":
        ids = [s.id for s in core.sets.values() if s.job == event.key and not s.finished]
        return bridge.settle(repo, core, core.cancel(ids, at), now=now)
    if event.kind == "priority":
        return _priority(repo, core, int(event.key or 0), now)
    if event.kind == "system":
        if str(event.key) in core.systems:  # told twice (direct call and NOTIFY, a rebuild)
            return []
        entry = bridge.system_entry(repo.systems.get_system(str(event.key)))
        return bridge.settle(repo, core, core.add_system(entry, at), now=now)
    if event.kind == "condition":
        system = repo.systems.get_system(str(event.key))
        if system.fqdn not in core.systems:  # its system-added event was lost
            entry = bridge.system_entry(system)
            return bridge.settle(repo, core, core.add_system(entry, at), now=now)
        if core.systems[system.fqdn].condition is system.condition:
            return []
        return bridge.settle(
            repo, core, core.change_condition(system.fqdn, system.condition, at), now=now
        )
    if event.kind == "access":
        # pools and inventories change systems' facts and the classes they meet: rebuild (rare)
        fresh = bridge.rebuild(repo, service.settings.scheduler())
        service.core = fresh
        free = sorted(f for systems in fresh.free.values() for f in systems)
        return bridge.settle(repo, fresh, fresh.offer(free, at), now=now)
    if event.kind == "locks":
        return locks_changed(repo, core, [int(event.key or 0)], now)
    if event.kind == "ended":
        return agent_ended(service, repo, core, int(event.key or 0), now)
    if event.kind == "finished":
        return finished(service, repo, core, int(event.key or 0), event.code, event.claim, now)
    if event.kind == "consistency":
        return consistency(service, repo, core, now)
    if event.kind == "filters":
        return eligibility.filters_changed(repo, core, now)
    if event.kind == "pause":
        return eligibility.pause_changed(service, repo, core, str(event.key), now)
    if event.kind == "reservation":
        actions = reservations.changed(repo, core, str(event.key), now)
        service.wake_at = reservations.next_wake(repo)
        return actions
    if event.kind == "pauses":  # a pause ran out: the follow-up after every event ends it
        return []
    raise ValueError(f"unknown scheduler event {event.kind!r}")


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
    service: SchedulerService,
    repo: Repository,
    core: Scheduler,
    set_id: int,
    code: int | None,
    claim: str | None,
    now: datetime,
) -> Actions:
    """A supervisor exited: recipes it left unfinished are aborted, then the set ends.

    Only the supervisor that holds the set's claim speaks for it: one that lost
    the claim (a second launch, an abandoned one) ended without touching anything.
    """
    entry = core.sets.get(set_id)
    if entry is None or entry.finished:
        return []
    if claim is None or repo.supervisors.claim_of(set_id) != claim:
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
    return out + _mark_broken(service, repo, core, view.recipes, now)


def agent_ended(
    service: SchedulerService, repo: Repository, core: Scheduler, set_id: int, now: datetime
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
    return out + _mark_broken(service, repo, core, view.recipes, now)


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
    service: SchedulerService,
    repo: Repository,
    core: Scheduler,
    recipes: tuple[RecipeView, ...],
    now: datetime,
) -> Actions:
    """A system that aborted ``health.max_consecutive_aborts`` sets in a row is broken."""
    limit = service.settings.health.max_consecutive_aborts
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
    service: SchedulerService, repo: Repository, core: Scheduler, now: datetime
) -> Actions:
    """The slow pass: quiet supervisors, lost launches, then the core's own repairs, locks,
    and the core's memory checked against the database."""
    timeout = service.settings.health.heartbeat_timeout
    ours = service.dispatcher.running()
    out, quiet = repair.supervisors(repo, core, timeout=timeout, ours=ours, now=now)
    for set_id in quiet:
        view = repo.jobs.get_recipe_set(set_id)  # before the stop request: was it cancelled?
        outcomes, reason = _left_unfinished(view, QUIET)
        repo.supervisors.request_stop(
            set_id, reason
        )  # recorded, and a supervisor that wakes up stops
        out += bridge.finish(repo, core, set_id, now=now, outcomes=outcomes, reason=reason)
        out += _mark_broken(service, repo, core, view.recipes, now)
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
        core = service.core = bridge.rebuild(repo, service.settings.scheduler())
        free = sorted(f for systems in core.free.values() for f in systems)
        out += bridge.settle(repo, core, core.offer(free, epoch(now)), now=now)
    # events lost between processes (a NOTIFY nobody heard): new sets and pending systems
    return out + bridge.resume(repo, core, now=now)
