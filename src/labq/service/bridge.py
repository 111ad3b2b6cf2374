"""The seam between the pure scheduling core and the database: no HTTP, no threads.

The core decides in memory; the database is the truth. So:

- :func:`rebuild` makes a :class:`Scheduler` whose state is what the database
  says (systems, access policy, every unfinished set in its place), deciding
  nothing; :func:`resume` then catches up on what a crash left undecided.
- :func:`apply` commits decisions — every one before anything acts on it —
  and returns what the caller must act on: :class:`~labq.service.actions.Launch`
  (the dispatcher runs the set under the claim the start was committed with),
  :class:`~labq.scheduler.decisions.Stop` (its supervisor stops) and
  :class:`Retried` (a clone to submit to the core).
- :func:`settle` applies decisions and submits clones until nothing is left
  but starts and stops; :func:`submit_job` and :func:`finish` are the two
  events the service feeds most, each in one all-or-nothing step.

Every function runs inside the caller's transaction. The core's memory moves
before the commit: if the transaction fails, throw the scheduler away and
:func:`rebuild` it.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, assert_never

from labq.domain.distro import DistroTree
from labq.domain.model import System
from labq.domain.reservesys import reserve_for
from labq.domain.states import RecipeState, Usage
from labq.scheduler import decisions as d
from labq.scheduler.core import Scheduler
from labq.scheduler.entries import RecipeSubmission, SchedulerConfig, SetSubmission, SystemEntry
from labq.scheduler.restore import RestoredRecipe, RestoredSet
from labq.service import predicting
from labq.service.actions import Actions, Launch
from labq.store import Repository, epoch
from labq.store.reservations import RESERVE
from labq.store.views import UnfinishedSet

ACTOR: Final = "scheduler"  # who the activity log says cloned a set


@dataclass(frozen=True)
class Retried:
    """A committed ``Retry``: ``clone`` is the new set, to be submitted to the core."""

    retry: d.Retry
    clone: int


Applied = Launch | d.Stop | Retried


def new_claim() -> str:
    """A fresh claim token: what the one supervisor of a started set carries."""
    return secrets.token_hex(16)


def new_claims(count: int) -> list[str]:
    """``count`` fresh claim tokens, from one read of the system's randomness."""
    pool = secrets.token_bytes(16 * count)
    return [pool[i : i + 16].hex() for i in range(0, 16 * count, 16)]


# --- from the database into the core ----------------------------------------------


def rebuild(repo: Repository, config: SchedulerConfig) -> Scheduler:
    """A scheduler in the state the database describes, without deciding anything.

    Sets the core never saw (every recipe still ``new``) are left for :func:`resume`.
    """
    scheduler = Scheduler(config, repo.access.load_access_policy())
    systems = [system_entry(s) for s in repo.restore.systems_as_added()]
    held = repo.reservations.open_reservations()
    for entry in systems:  # reserved and loaned systems stay out of the queue
        entry.held_by = held[entry.fqdn].holder if entry.fqdn in held else None
    stored = [u for u in repo.restore.unfinished_sets() if not _unseen(u)]
    predicted = predicting.predict_sets(repo, stored, keep=False)  # kept ones, mostly
    sets = [_restored(u, predicting.seconds(predicted[u.id])) for u in stored]
    scheduler.restore(systems, sets, held=repo.locks.held_locks(), trees=trees_by_lab(repo))
    # paused queues hold again; run-out ones end at next check
    for pause in repo.pauses.list_pauses():
        scheduler.pause_lab(pause.lab, scheduler.now)
    return scheduler


def resume(repo: Repository, scheduler: Scheduler, *, now: datetime) -> Actions:
    """After :func:`rebuild`: submit the sets the core never saw, decide the retries of sets
    that ended unheard, offer pending systems.

    All exist only when the service stopped between a commit and the event
    that should have followed it.
    """
    unseen = _submissions(
        repo,
        [u for u in repo.restore.unfinished_sets() if _unseen(u) and u.id not in scheduler.sets],
    )
    out = settle(repo, scheduler, scheduler.submit(unseen, epoch(now)), now=now)
    for ended in repo.restore.ended_sets_owing_retry():
        if ended.id in scheduler.sets:
            continue  # the core knows it: its supervisor's end is on its way
        outcomes = {r.id: r.state for r in ended.recipes}
        aborted_on = {
            r.id: r.system
            for r in ended.recipes
            if r.state is RecipeState.ABORTED and r.system is not None
        }
        decided = scheduler.ended_unheard(_submission(ended), outcomes, aborted_on, epoch(now))
        out += settle(repo, scheduler, decided, now=now)
    pending = scheduler.offer(repo.restore.pending_systems(), epoch(now))
    return out + settle(repo, scheduler, pending, now=now)


def trees_by_lab(repo: Repository, lab: str | None = None) -> dict[str, list[DistroTree]]:
    """The distro trees of every lab (or of ``lab``), by lab."""
    out: dict[str, list[DistroTree]] = {} if lab is None else {lab: []}
    for tree in repo.distros.trees(lab):
        out.setdefault(tree.lab, []).append(tree)
    return out


def system_entry(system: System) -> SystemEntry:
    """A stored system as the core sees it."""
    size = system.attributes.get("vm_size")  # a VM slot (labq.service.vms)
    vm = size if isinstance(size, str) else None
    return SystemEntry(
        system.fqdn, system.lab, system.facts(), system.pools, system.condition, vm=vm
    )


def submissions(repo: Repository, set_ids: Iterable[int]) -> list[SetSubmission]:
    """The stored sets (unfinished ones) as submissions for the core, by id, predicted."""
    return _submissions(repo, repo.restore.unfinished_sets(set_ids=list(set_ids)))


# --- from the core into the database ------------------------------------------------


def apply(repo: Repository, decisions: Sequence[d.Decision], *, now: datetime) -> list[Applied]:
    """Commit decisions in order, all or nothing; returns those the caller acts on.

    Runs of the frequent kinds (placements, queue moves, starts, idle systems)
    are written as batches (``labq.store.batch``); the rest one by one.
    """
    out: list[Applied] = []
    with repo.atomic():
        for run in runs(decisions):
            if isinstance(run[0], _BATCHED):
                out += _apply_run(repo, run, now)
            else:
                action = _apply_one(repo, run[0], now)
                out += [] if action is None else [action]
    return out


_BATCHED: Final = (d.Schedule, d.Enqueue, d.Assign, d.Start, d.Idle)


def runs(decisions: Sequence[d.Decision]) -> list[list[d.Decision]]:
    """The decisions in order, consecutive ones of a batched kind together; a run ends
    where its kind changes or a recipe, set or system would come up twice in it.

    Starts are gathered and written after what follows them — nothing later in one
    event un-schedules a started set — unless a later decision names that set.
    """
    out: list[list[d.Decision]] = []
    starts: list[d.Decision] = []
    starting: set[int] = set()
    seen: set[object] = set()
    for decision in decisions:
        if isinstance(decision, d.Start):
            starts.append(decision)
            starting.add(decision.set)
            continue
        if _set_of(decision) in starting:
            out.append(starts)
            starts, starting, seen = [], set(), set()
        keys = _keys(decision)
        last = out[-1] if out else None
        if (
            last is not None
            and isinstance(decision, _BATCHED)
            and type(last[0]) is type(decision)
            and not keys & seen
        ):
            last.append(decision)
        else:
            out.append([decision])
            seen = set()
        seen |= keys
    if starts:
        out.append(starts)
    return out


def _set_of(decision: d.Decision) -> int | None:
    """The set a decision is about (None: a system's)."""
    return None if isinstance(decision, d.Idle) else decision.set


def _keys(decision: d.Decision) -> set[object]:
    match decision:
        case d.Schedule(recipe=recipe, system=system):
            return {("recipe", recipe), ("system", system)}
        case d.Enqueue(recipe=recipe) | d.Assign(recipe=recipe):
            return {("recipe", recipe)}
        case d.Start(set=set_id):
            return {("set", set_id)}
        case d.Idle(system=system):
            return {("system", system)}
    return set()


def _apply_run(repo: Repository, run: list[d.Decision], now: datetime) -> list[Applied]:
    first = run[0]
    if isinstance(first, d.Schedule):
        repo.batch.schedule_many(
            [(x.recipe, x.system) for x in run if isinstance(x, d.Schedule)], now=now
        )
    elif isinstance(first, d.Enqueue | d.Assign):
        target = RecipeState.QUEUED if isinstance(first, d.Enqueue) else RecipeState.ASSIGNED
        recipes = [x.recipe for x in run if isinstance(x, d.Enqueue | d.Assign)]
        repo.batch.queue_many(recipes, target, now=now)
    elif isinstance(first, d.Start):
        starts = [x for x in run if isinstance(x, d.Start)]
        launches = [Launch(x.set, c) for x, c in zip(starts, new_claims(len(starts)), strict=True)]
        labs = {x.set: x.lab for x in run if isinstance(x, d.Start)}
        repo.batch.start_many([(x.set, labs[x.set], x.claim) for x in launches], now=now)
        return list(launches)
    elif isinstance(first, d.Idle):
        repo.batch.idle_many([x.system for x in run if isinstance(x, d.Idle)], now=now)
    return []


def settle(
    repo: Repository, scheduler: Scheduler, decisions: Sequence[d.Decision], *, now: datetime
) -> Actions:
    """Apply decisions and submit every clone to the core, until only starts and stops remain."""
    out: Actions = []
    todo = list(decisions)
    while todo:
        clones = []
        for action in apply(repo, todo, now=now):
            if isinstance(action, Retried):
                clones.append(action.clone)
            else:
                out.append(action)
        todo = scheduler.submit(submissions(repo, clones), epoch(now)) if clones else []
    return out


def submit_jobs(
    repo: Repository, scheduler: Scheduler, job_ids: Iterable[int], *, now: datetime
) -> Actions:
    """The new-job event for stored jobs: their unfinished sets go to the core, settled.

    Sets the core knows already are left alone, so a repeated event is a no-op.
    """
    with repo.atomic():
        # a retried set has ended, so the unfinished ones are the jobs' current attempts
        stored = repo.restore.unfinished_sets(jobs=list(job_ids))
        subs = _submissions(repo, [u for u in stored if u.id not in scheduler.sets])
        if not subs:
            return []
        return settle(repo, scheduler, scheduler.submit(subs, epoch(now)), now=now)


def submit_job(repo: Repository, scheduler: Scheduler, job_id: int, *, now: datetime) -> Actions:
    """The new-job event for one stored job (:func:`submit_jobs`)."""
    return submit_jobs(repo, scheduler, [job_id], now=now)


def finish(
    repo: Repository,
    scheduler: Scheduler,
    set_id: int,
    *,
    now: datetime,
    outcomes: Mapping[int, RecipeState] | None = None,
    reason: str | None = None,
) -> Actions:
    """A started set ended: its recipes end, the core hears it, its decisions commit.

    Recipes already ended keep their state; the others move to their outcome in
    ``outcomes`` (completed, cancelled or aborted). One step, so a retry can
    never be lost between a set's end and the core's answer.
    """
    with repo.atomic():
        repo.supervisors.lock_recipe_set(
            set_id
        )  # the set's row first, as a supervisor's writes take it
        ended = {}
        for recipe in repo.jobs.get_recipe_set(set_id).recipes:
            state = recipe.state
            if not state.is_final:
                if outcomes is None or recipe.id not in outcomes:
                    raise ValueError(f"recipe {recipe.id} has not ended and has no outcome")
                state = outcomes[recipe.id]
                repo.moves.move_recipe(recipe.id, state, now=now, reason=reason)
            ended[recipe.id] = state
        repo.history.record_run(set_id, now=now)  # what the predictions learn from
        decisions = _keep_reserved(repo, scheduler, set_id, now)  # before the core frees them
        decisions += scheduler.finish(set_id, ended, epoch(now))
        served = repo.locks.release_locks(set_id, now=now)  # however it ended
        held = repo.locks.held_locks(served)
        for other in served:
            decisions += scheduler.locks_held(other, held.get(other), epoch(now))
        return settle(repo, scheduler, decisions, now=now)


# --- the parts ---------------------------------------------------------------------


def _keep_reserved(
    repo: Repository, scheduler: Scheduler, set_id: int, now: datetime
) -> list[d.Decision]:
    """Recipes of an ending set whose ``<reservesys>`` applies keep their systems, reserved
    to the job's owner for the duration (the recipes themselves end as usual)."""
    view = repo.jobs.get_recipe_set(set_id)
    out: list[d.Decision] = []
    for spec, recipe in zip(view.spec.recipes, view.recipes, strict=True):
        seconds = reserve_for(spec.metadata, recipe.state, recipe.result)
        system = recipe.system
        if (
            seconds is None
            or system is None
            or repo.reservations.reservation_of(system) is not None
        ):
            continue  # an admin's loan made meanwhile stands
        owner = repo.reservations.owner_of_set(set_id)
        until = now + timedelta(seconds=seconds)
        why = f"<reservesys> of recipe {recipe.id}"
        repo.reservations.reserve_system(
            system,
            owner,
            kind=RESERVE,
            actor=ACTOR,
            now=now,
            until=until,
            recipe=recipe.id,
            reason=why,
        )
        out += scheduler.hold_system(system, owner, epoch(now))
    return out


def _apply_one(repo: Repository, decision: d.Decision, now: datetime) -> Applied | None:
    match decision:
        case d.Schedule(recipe=recipe, system=system):
            repo.moves.move_recipe(recipe, RecipeState.SCHEDULED, now=now, system=system)
        case d.Assign(recipe=recipe):
            repo.moves.move_recipe(recipe, RecipeState.ASSIGNED, now=now)
        case d.Enqueue(recipe=recipe):
            repo.moves.move_recipe(recipe, RecipeState.QUEUED, now=now)
        case d.Release(recipe=recipe, reason=reason):
            repo.moves.move_recipe(recipe, RecipeState.ASSIGNED, now=now, reason=reason)
        case d.Start(set=set_id, lab=lab):
            claim = new_claim()
            repo.supervisors.start_recipe_set(set_id, lab=lab, now=now, claim=claim)
            return Launch(set_id, claim)
        case d.CreateVm():
            pass  # the set's supervisor makes the VM as it installs the recipe
        case d.Idle(system=system):
            repo.systems.set_usage(system, Usage.IDLE, now=now)
        case d.Cancel(recipe=recipe):
            repo.moves.move_recipe(recipe, RecipeState.CANCELLED, now=now)
        case d.Abort(recipe=recipe, reason=reason):
            repo.moves.move_recipe(recipe, RecipeState.ABORTED, now=now, reason=reason)
        case d.Stop(set=set_id, reason=reason):
            repo.supervisors.request_stop(set_id, reason)
            return decision
        case d.Retry(set=set_id, excluded=excluded):
            if repo.jobs.get_recipe_set(set_id).error is not None:
                return None  # its job was cancelled after the set ended: no retry
            clone = repo.retries.clone_recipe_set(set_id, actor=ACTOR, now=now, excluded=excluded)
            return Retried(decision, clone)
        case d.SetError(set=set_id, message=message):
            repo.retries.set_recipe_set_error(set_id, message)
        case _:
            assert_never(decision)
    return None


def _unseen(stored: UnfinishedSet) -> bool:
    """Submitted to the database but never to the core: every recipe is still new."""
    return all(r.state is RecipeState.NEW for r in stored.recipes)


def _submissions(repo: Repository, stored: list[UnfinishedSet]) -> list[SetSubmission]:
    """Sets as the core takes them, each with its run-time prediction (made and kept now
    for a set that has none yet)."""
    predicted = predicting.predict_sets(repo, stored)
    return [_submission(u, predicting.seconds(predicted[u.id])) for u in stored]


def _submission(stored: UnfinishedSet, predicted: float | None = None) -> SetSubmission:
    return SetSubmission(
        id=stored.id,
        job=stored.job,
        recipes=tuple(
            RecipeSubmission(r.id, r.requirement, r.role, r.excluded, r.force, r.distro)
            for r in stored.recipes
        ),
        priority=stored.priority,
        submitted=epoch(stored.submitted_at),
        group=stored.group,
        max_time=None if stored.max_time is None else float(stored.max_time),
        max_retries=stored.max_retries,
        attempt=stored.attempt,
        retry_of=stored.retry_of,
        locks=stored.locks,
        blocked=stored.blocked,
        buckets=stored.buckets,
        predicted=predicted,
        kept=float(max((r.keeps for r in stored.recipes), default=0)),
    )


def _restored(stored: UnfinishedSet, predicted: float | None) -> RestoredSet:
    """Where the core left a stored set's recipes.

    The core keeps every recipe of a started set scheduled on its system until
    ``finish`` (even one the database already shows ended); a waiting set's
    recipes are queued, assigned, or scheduled on the system they hold.
    """
    started = stored.started_at is not None
    recipes = []
    held: list[float] = []
    for recipe in stored.recipes:
        if started or recipe.state.holds_system:
            recipes.append(RestoredRecipe(recipe.id, RecipeState.SCHEDULED, recipe.system))
            if not started and recipe.scheduled_at is not None:
                held.append(epoch(recipe.scheduled_at))
        elif recipe.state is RecipeState.NEW:  # a half-submitted set: the core queued it
            recipes.append(RestoredRecipe(recipe.id, RecipeState.QUEUED))
        else:
            recipes.append(RestoredRecipe(recipe.id, recipe.state))
    return RestoredSet(
        submission=_submission(stored, predicted),
        recipes=tuple(recipes),
        started_at=None if stored.started_at is None else epoch(stored.started_at),
        # The database keeps no hold start; the oldest hold it still has is the best bound.
        held_since=min(held) if held else None,
    )
