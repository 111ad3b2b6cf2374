"""A job's derived state, read in bulk: in Python for a few jobs, in SQL for listings.

A job's state comes from the recipes of each set's latest attempt
(:func:`labq.domain.states.job_state`); a set that ended aborted and may still
be retried counts as ``new`` until the scheduler has made its clone or said why
there is none (:func:`labq.domain.states.retry_owed`). Both forms here follow
that one rule, so ``job show``, ``job list --state``, dependencies and
``job submit --wait`` agree on when a job has ended.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Final

from sqlalchemy import ColumnElement, Connection, Select, and_, case, exists, func, select
from sqlalchemy.orm import aliased

from labq.domain.states import DERIVED_ORDER, RecipeState, job_state, retry_owed
from labq.store.tables import Recipes, RecipeSets
from labq.store.views import current_attempts

# derived_state as a minimum over codes (the SQL form needs numbers)
STATE_CODES: Final = {state: code for code, state in enumerate(DERIVED_ORDER)}

_SetFacts = tuple[int | None, int, int, str | None, list[tuple[RecipeState, bool]]]


def job_states(conn: Connection, job_ids: Iterable[int]) -> dict[int, RecipeState]:
    """The derived state of each of these jobs that exists, in two columns' worth of reads."""
    wanted = sorted(set(job_ids))
    if not wanted:
        return {}
    rows = conn.execute(
        select(
            RecipeSets.job_id,
            RecipeSets.id,
            RecipeSets.retry_of,
            RecipeSets.attempt,
            RecipeSets.max_retries,
            RecipeSets.error,
            Recipes.state,
            Recipes.system_id,
        )
        .join(Recipes, Recipes.recipe_set_id == RecipeSets.id)
        .where(RecipeSets.job_id.in_(wanted))
    ).all()
    sets: dict[int, dict[int, _SetFacts]] = defaultdict(dict)
    for job_id, set_id, retry_of, attempt, max_retries, error, state, system in rows:
        facts = sets[job_id].setdefault(set_id, (retry_of, attempt, max_retries, error, []))
        facts[4].append((RecipeState(state), system is not None))
    out = {}
    for job_id, by_set in sets.items():
        current = current_attempts(by_set.items(), key=lambda s: (s[0], s[1][0]))
        out[job_id] = job_state(
            (
                [state for state, _ in recipes],
                retry_owed(recipes, attempt=attempt, max_retries=most, error=error),
            )
            for _, (_, attempt, most, error, recipes) in current
        )
    return out


def job_state_codes() -> Select[int, int]:
    """``(job_id, code)`` of every job, as a query: the SQL form of :func:`job_states`."""
    clone = aliased(RecipeSets)
    superseded = exists().where(clone.retry_of == RecipeSets.id)
    code = case(
        (retry_owed_clause(), STATE_CODES[RecipeState.NEW]),
        else_=case({s.value: c for s, c in STATE_CODES.items()}, value=Recipes.state),
    )
    return (
        select(RecipeSets.job_id.label("job_id"), func.min(code).label("code"))
        .join(Recipes, Recipes.recipe_set_id == RecipeSets.id)
        .where(~superseded)
        .group_by(RecipeSets.job_id)
    )


def retry_owed_clause() -> ColumnElement[bool]:
    """:func:`retry_owed` of the set in ``RecipeSets`` (``finished_at``: its last recipe ended)."""
    other = aliased(Recipes)
    aborted_there = exists().where(
        other.recipe_set_id == RecipeSets.id,
        other.state == RecipeState.ABORTED.value,
        other.system_id.is_not(None),
    )
    cancelled = exists().where(
        other.recipe_set_id == RecipeSets.id, other.state == RecipeState.CANCELLED.value
    )
    return and_(
        RecipeSets.finished_at.is_not(None),
        RecipeSets.error.is_(None),
        RecipeSets.attempt - 1 < RecipeSets.max_retries,
        aborted_there,
        ~cancelled,
    )
