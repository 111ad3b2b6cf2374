"""Eligibility before order, in the scheduler thread: dependencies, filters, paused labs.

What blocks a set and which rate-limit buckets it counts in are read from the
database with the set itself (``repo.restore.unfinished_sets``), so a submitted,
retried or rebuilt set reaches the core with them. Here is what changes them
later, each inside the event's transaction:

- :func:`follow_up`, after every event: pauses whose time ran out end; after an
  event that may have ended a job, the dependents of jobs that ended are
  unblocked, or cancelled (with the reason) when a dependency ended in a state
  they do not accept.
- :func:`filters_changed`: every set not started yet is judged again by the
  rules; one ``change_eligibility`` call, and the jobs a reject rule now
  matches are cancelled.
- :func:`pause_changed`: a lab's queue was paused or resumed through the API.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from datetime import datetime
from typing import Final

from labq.scheduler.core import Scheduler
from labq.scheduler.entries import Eligibility
from labq.service import bridge, reservations
from labq.service.actions import Actions
from labq.service.outcome import Outcome, Wake
from labq.store import Repository, epoch
from labq.store.admission import JobAdmission

ACTOR: Final = "scheduler"
MAX_ROUNDS: Final = 1000  # a cancelled job ends too: its own dependents come next


def follow_up(
    repo: Repository,
    core: Scheduler,
    now: datetime,
    *,
    wake_at: datetime | None,
    jobs_may_have_ended: bool = True,
    only: Collection[int] | None = None,
) -> Outcome:
    """After an event: end the pauses that ran out (``wake_at``, the service's timer, is
    due), and settle the dependents of ended jobs.

    The dependents are read from the database only when the event may have
    ended a job: the pending-system and other frequent events skip that query.
    ``only`` limits them to these jobs (a submitted job: its dependencies may have
    ended between its submission and its event).
    """
    out: Actions = []
    wake: Wake | None = None
    if wake_at is not None and wake_at <= now:
        for lab in repo.pauses.expire_pauses(now):
            out += bridge.settle(repo, core, core.resume_lab(lab, epoch(now)), now=now)
        out += reservations.expire(repo, core, now)
        wake = Wake(reservations.next_wake(repo))
    if not jobs_may_have_ended:
        return Outcome(out, wake=wake)
    # a set that ended may have left its systems reserved (<reservesys>): wake when due
    wake = Wake(reservations.next_wake(repo))
    for _ in range(MAX_ROUNDS):
        # a dependency once met stays met: only sets the core still holds back need a look
        review = {
            job: sets
            for job, sets in repo.admission.dependents_to_review(only).items()
            if any(s in core.sets and core.sets[s].blocked is not None for s in sets)
        }
        if not review:
            break
        verdicts = repo.admission.admission_of(review.keys())
        out += _apply(repo, core, review, verdicts, now)
        if not any(v.refused for v in verdicts.values()):
            break
    return Outcome(out, wake=wake)


def filters_changed(repo: Repository, core: Scheduler, now: datetime) -> Actions:
    """Rules were added or removed: judge every set not started yet again."""
    waiting = repo.admission.waiting_sets()
    return _apply(repo, core, waiting, repo.admission.admission_of(waiting.keys()), now)


def pause_changed(repo: Repository, core: Scheduler, lab: str, now: datetime) -> Outcome:
    """A lab's queue was paused or resumed: the core follows the database, and the timer
    wakes when the pause runs out."""
    at = epoch(now)
    paused = {p.lab for p in repo.pauses.list_pauses(now=now)}
    decisions = core.pause_lab(lab, at) if lab in paused else core.resume_lab(lab, at)
    wake = Wake(reservations.next_wake(repo))
    return Outcome(bridge.settle(repo, core, decisions, now=now), wake=wake)


# --- the parts ---------------------------------------------------------------------


def _apply(
    repo: Repository,
    core: Scheduler,
    sets_of: Mapping[int, Iterable[int]],
    verdicts: Mapping[int, JobAdmission],
    now: datetime,
) -> Actions:
    """Cancel the waiting sets of refused jobs; tell the core what changed for the others."""
    at = epoch(now)
    out: Actions = []
    updates: dict[int, Eligibility] = {}
    for job_id, set_ids in sorted(sets_of.items()):
        verdict = verdicts.get(job_id)
        if verdict is None:
            continue
        if verdict.refused is not None:
            cancelled = repo.admission.cancel_sets(
                set_ids, reason=verdict.refused, actor=ACTOR, now=now
            )
            known = [s for s in cancelled if s in core.sets]
            if known:
                out += bridge.settle(repo, core, core.cancel(known, at), now=now)
            continue
        for set_id in set_ids:
            entry = core.sets.get(set_id)
            if entry is None or not entry.waiting:
                continue
            if (entry.blocked, entry.buckets) != (verdict.blocked, verdict.buckets):
                updates[set_id] = Eligibility(verdict.blocked, verdict.buckets)
    if updates:
        out += bridge.settle(repo, core, core.change_eligibility(updates, at), now=now)
    return out
