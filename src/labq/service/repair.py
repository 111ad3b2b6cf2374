"""The consistency pass's repairs that need the database: supervisors, launches, memory.

- A supervisor that stopped heart-beating is killed where this server runs it
  (its end then comes back as any other, once everything it ran is gone); one
  running elsewhere gave its tasks up by itself after half the heartbeat timeout
  (``labq.dispatch.database_reporter``), so after the whole timeout its set ends
  aborted here.
- A set claimed for a supervisor that never took it up (the server died between
  the commit and the launch) is claimed afresh and launched again; the old
  claim is void, so a late supervisor finds the set gone and touches nothing.
- The scheduler's memory is compared with the database, which is the truth: any
  set or recipe the core does not know as stored (an event lost between
  processes, a deposed leader's last commit) makes it rebuild from the database.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta

from labq.domain.states import RecipeState
from labq.domain.stops import QUIET
from labq.scheduler.view import SchedulerView
from labq.service import bridge
from labq.service.actions import Actions, Kill, Launch
from labq.store import Repository
from labq.store.unfinished import Placed

log = logging.getLogger("labq.scheduler")
_SHOWN = 5  # differences named in the log line


def supervisors(
    repo: Repository, core: SchedulerView, *, timeout: float, ours: Iterable[int], now: datetime
) -> tuple[Actions, list[int]]:
    """Orders for quiet supervisors and lost launches; and the quiet sets to end here."""
    watched = set(ours)
    actions: Actions = []
    to_end: list[int] = []
    for set_id in repo.supervisors.stale_supervisors(older_than=now - timedelta(seconds=timeout)):
        if set_id in watched:
            repo.supervisors.request_stop(set_id, QUIET)  # the reason its recipes end aborted with
            actions.append(Kill(set_id))
        elif set_id in core.sets and not core.sets[set_id].finished:
            to_end.append(set_id)
    for set_id, claim in repo.supervisors.unsupervised_sets(
        claimed_before=now - timedelta(seconds=timeout)
    ):
        if set_id in watched:
            continue  # its supervisor is on its way
        fresh = bridge.new_claim()
        if repo.supervisors.claim_set(set_id, fresh, now=now, replacing=claim):
            log.warning("set %s: its supervisor never took it up; launching it again", set_id)
            actions.append(Launch(set_id, fresh))
    return actions, to_end


def differences(repo: Repository, core: SchedulerView) -> list[str]:
    """Where the scheduler's memory and the database disagree on unfinished sets."""
    stored: dict[int, list[Placed]] = {}
    for placed in repo.restore.unfinished_placements():
        stored.setdefault(placed.set_id, []).append(placed)
    out: list[str] = []
    for set_id, recipes in stored.items():
        if all(r.state is RecipeState.NEW for r in recipes):
            continue  # submitted, its event still on its way: the resume step takes it
        entry = core.sets.get(set_id)
        if entry is None or entry.finished:
            out.append(f"set {set_id} is unfinished in the database, unknown to the scheduler")
        elif recipes[0].started != entry.started:
            out.append(f"set {set_id} started={recipes[0].started} in the database")
        elif not entry.started:
            out += _recipe_differences(core, recipes)
    for entry in core.sets.values():
        # a started set that ended in the database waits for its supervisor's exit
        if not entry.finished and not entry.started and entry.id not in stored:
            out.append(f"set {entry.id} has ended in the database, not in the scheduler")
    return out


def ended_unheard(
    repo: Repository, core: SchedulerView, ours: Iterable[int], *, busy_since: datetime
) -> list[int]:
    """Started sets that ended in the database while no supervisor of ours runs them: their
    end was never told to the scheduler (its supervisor's exit went unseen).

    A lab agent's supervisor that heart-beat since ``busy_since`` and has not exited is
    still finishing up (archiving, giving systems back): its end comes from the agent.
    """
    running = set(ours)
    started = [e.id for e in core.sets.values() if e.started and not e.finished]
    candidates = [s for s in started if s not in running]
    if not candidates:
        return []
    unfinished = {p.set_id for p in repo.restore.unfinished_placements()}
    ended = [s for s in candidates if s not in unfinished]
    busy = repo.agents.agent_busy(ended, since=busy_since)
    return [s for s in ended if s not in busy]


def _recipe_differences(core: SchedulerView, recipes: list[Placed]) -> list[str]:
    out = []
    for placed in recipes:
        known = core.recipes.get(placed.recipe_id)
        if known is None:
            out.append(f"recipe {placed.recipe_id} is unknown to the scheduler")
        elif known.system != placed.system or (
            placed.system is None and known.state is not placed.state
        ):
            out.append(
                f"recipe {placed.recipe_id} is {placed.state.value} on {placed.system}"
                f" in the database, {known.state.value} on {known.system} in the scheduler"
            )
    return out


def describe(found: list[str]) -> str:
    """The first few differences, for one log line."""
    more = f" (and {len(found) - _SHOWN} more)" if len(found) > _SHOWN else ""
    return "; ".join(found[:_SHOWN]) + more
