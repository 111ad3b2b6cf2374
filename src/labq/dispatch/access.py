"""What a supervisor takes for its set before anything is provisioned: credentials and locks.

- The set's own API token (``LABQ_TOKEN``, with ``LABQ_URL``) for its tasks, so a
  task can call ``labq lock acquire`` as its set. It is a token of the job's
  owner that only reads and takes locks, and stops working when the set ends.
- The locks the set declared by name (and its lab's whole-lab lock, shared or,
  for a whole-lab set, exclusive), all together or none: the set is ``waiting``
  until it has them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy import Engine

from labq.domain.contention import LockNeeds
from labq.domain.locktable import Outcome, declared_grants
from labq.store import reading, transaction

TakeLocks = Callable[[], Outcome]


def set_credentials(engine: Engine, set_id: int, claim: str, api_url: str | None) -> dict[str, str]:
    """``LABQ_URL`` and a fresh ``LABQ_TOKEN`` for the set's tasks; none without an API URL."""
    if not api_url:
        return {}
    now = datetime.now(UTC)
    with transaction(engine) as repo:
        repo.supervisors.guard_claim(set_id, claim)
        owner = repo.jobs.load_job(repo.jobs.get_recipe_set(set_id).job_id).owner
        _id, secret = repo.tokens.create_token(
            owner, f"recipe set {set_id}", now=now, recipe_set=set_id, actor="supervisor"
        )
    return {"LABQ_URL": api_url, "LABQ_TOKEN": secret}


def declared_locks(engine: Engine, set_id: int, claim: str) -> TakeLocks:
    """Something to call until it says granted: each call asks again (and keeps the place)."""
    with reading(engine) as repo:
        view = repo.jobs.get_recipe_set(set_id)
    assert view.lab is not None, "a started set has its lab"
    grants = declared_grants(LockNeeds.of(view.spec.locks), view.lab)

    def take() -> Outcome:
        with transaction(engine) as repo:
            repo.supervisors.guard_claim(set_id, claim)
            return repo.locks.acquire_locks(set_id, grants, now=datetime.now(UTC))

    return take
