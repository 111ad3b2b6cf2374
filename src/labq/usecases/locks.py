"""The lock service: running sets take and release shared and exclusive locks.

A set's own token acts for that set; an admin names the set. Every acquire also takes
the set's lab's whole-lab lock shared, so a set holding the whole lab excludes every
other set of that lab. A change posts :class:`LocksChanged` for each set whose locks
changed (its spv weight on others changes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from labq.domain.events import EventSink, LocksChanged
from labq.domain.locktable import Grant, Outcome
from labq.errors import ConflictError, ForbiddenError, RequestError
from labq.store import Credential, Repository


@dataclass(frozen=True)
class Wanted:
    """One lock asked for: a resource ``name`` (``*`` for all) on a lock ``level``."""

    level: str
    name: str
    exclusive: bool = False


def acting_set(found: Credential, named: int | None) -> int:
    """The set a credential takes or releases locks for: a set's own token acts for its
    set only; an admin must name one; anyone else may not."""
    if found.recipe_set is not None:
        if named not in (None, found.recipe_set):
            raise ForbiddenError(f"this token acts for recipe set {found.recipe_set} only")
        return found.recipe_set
    if not found.user.admin:
        raise ForbiddenError("locks are taken by a running set's own token (LABQ_TOKEN), or admins")
    if named is None:
        raise RequestError("say which recipe set the locks are for", place="set")
    return named


def grants(levels: Sequence[str], wanted: Sequence[Wanted]) -> list[Grant]:
    """The locks asked for, each on a level the settings declare."""
    for index, ref in enumerate(wanted):
        if ref.level not in levels:
            known = ", ".join(levels)
            raise RequestError(
                f"unknown lock level {ref.level!r} (expected one of {known}; the whole-lab"
                " lock is declared in the job, not taken by tasks)",
                place=f"locks[{index}].level",
            )
    return [Grant(ref.level, ref.name, ref.exclusive) for ref in wanted]


def acquire(
    repo: Repository,
    set_id: int,
    wanted: list[Grant],
    *,
    wait: bool,
    now: datetime,
    sink: EventSink,
) -> tuple[Outcome, tuple[Grant, ...]]:
    """Take every lock of ``wanted`` for the set, or queue for them (``wait``). Returns the
    outcome and the locks the set holds; :func:`refuse_unless_granted_or_waiting` says
    whether it is a refusal, once the outcome is committed."""
    outcome = repo.locks.acquire_locks(set_id, wanted, now=now, wait=wait, lab_lock=True)
    held = tuple(repo.locks.held_locks([set_id]).get(set_id, ()))
    if outcome.granted:
        sink.post(LocksChanged(set_id))
    return outcome, held


def refuse_unless_granted_or_waiting(set_id: int, outcome: Outcome, *, wait: bool) -> None:
    """Refuse (:class:`ConflictError`) an acquire that would deadlock, or that was not
    granted and must not wait. Raised after the commit: the lock table keeps what the
    refused acquire changed (a waiter dropped), as it always has."""
    if outcome.granted:
        return
    if outcome.refused is not None or not wait:
        reason = outcome.refused or outcome.describe()
        raise ConflictError(f"recipe set {set_id}: {reason}", place="locks")


def release(
    repo: Repository,
    set_id: int,
    wanted: list[Grant] | None,
    *,
    now: datetime,
    sink: EventSink,
) -> tuple[list[int], tuple[Grant, ...]]:
    """Let go of some locks of the set (None: all); returns the sets now served (waiters
    they blocked) and the locks the set still holds."""
    served = repo.locks.release_locks(set_id, wanted, now=now)
    held = tuple(repo.locks.held_locks([set_id]).get(set_id, ()))
    for changed in [set_id, *served]:
        sink.post(LocksChanged(changed))
    return served, held
