"""The schema itself refuses impossible rows, whoever writes them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Connection, insert, select, update
from sqlalchemy.exc import IntegrityError

from labq.store import Repository
from labq.store.tables import (
    AccessRules,
    Activity,
    RecipeHistory,
    Recipes,
    RecipeSets,
    Systems,
    Tasks,
    Tokens,
    UsageHistory,
)

from .conftest import at, job_spec, recipe_ids

Ids = dict[str, int]
Write = Callable[[Connection, Ids], Any]


def _recipe(**values: Any) -> Write:
    return lambda c, ids: c.execute(update(Recipes).where(Recipes.id == ids["r"]).values(**values))


def _system(**values: Any) -> Write:
    return lambda c, ids: c.execute(update(Systems).where(Systems.id == ids["s1"]).values(**values))


def _history(**values: Any) -> Write:
    row = {"usage": "idle", "condition": "automated", "started_at": at(10)}
    return lambda c, ids: c.execute(
        insert(UsageHistory).values({**row, "system_id": ids["s1"], **values})
    )


def _set(**values: Any) -> Write:
    return lambda c, ids: c.execute(
        update(RecipeSets).where(RecipeSets.id == ids["set"]).values(**values)
    )


def _token(**values: Any) -> Write:
    row = {"user_id": 1, "name": "t", "digest": "0" * 64, "created_at": at(1)}
    return lambda c, ids: c.execute(insert(Tokens).values({**row, **values}))


IMPOSSIBLE: dict[str, Write] = {
    "unknown recipe state": _recipe(state="processed"),
    "scheduled without a system": _recipe(state="scheduled"),
    "new with a system": lambda c, ids: _recipe(system_id=ids["s1"])(c, ids),
    "finished without a time": _recipe(state="cancelled"),
    "finish time while running": _recipe(finished_at=at(5)),
    "unknown result": _recipe(result="great"),
    "unknown usage": _system(usage="napping"),
    "unknown condition": _system(condition="sleepy"),
    "busy without a recipe": _system(usage="running"),
    "held but idle": lambda c, ids: _system(recipe_id=ids["r"])(c, ids),
    "two open history rows": _history(),
    "history ending before it starts": _history(started_at=at(10), ended_at=at(9)),
    "a retry that is the first attempt": lambda c, ids: c.execute(
        update(RecipeSets).where(RecipeSets.id == ids["set"]).values(attempt=2)
    ),
    "unknown priority": lambda c, ids: c.execute(
        insert(AccessRules).values(pool_id=1, group_id=1, max_priority="critical")
    ),
    "zero timeout": lambda c, ids: c.execute(update(Tasks).values(timeout=0)),
    "activity about nothing": lambda c, ids: c.execute(
        insert(Activity).values(at=at(1), actor="x", object_kind="job", action="poke")
    ),
    "a system in no lab": _system(lab_id=999),
    "a negative abort count": _system(consecutive_aborts=-1),
    "started in no lab": lambda c, ids: _set(started_at=at(2))(c, ids),
    "a supervisor for a set that never started": lambda c, ids: _set(
        supervisor_pid=1, supervisor_host="h", heartbeat_at=at(2)
    )(c, ids),
    "a stop for a set that neither started nor ended": lambda c, ids: _set(stop_reason="x")(c, ids),
    "a set ending before it starts": lambda c, ids: _set(
        lab_id=1, started_at=at(5), finished_at=at(4)
    )(c, ids),
    "a task running that never started": lambda c, ids: c.execute(
        update(Tasks).values(status="running")
    ),
    "a task ended without a time": lambda c, ids: c.execute(
        update(Tasks).values(status="cancelled")
    ),
    "history in an unknown state": lambda c, ids: c.execute(
        insert(RecipeHistory).values(recipe_id=ids["r"], state="processed", at=at(1))
    ),
    "a token keeping its secret": _token(digest="lq_" + "x" * 43),
    "a token expiring before it was made": _token(expires_at=at(0)),
    "two tokens with one digest": lambda c, ids: [_token()(c, ids), _token()(c, ids)],
}


@pytest.fixture
def ids(seeded: Repository) -> Ids:
    job_id = seeded.queue.submit_job(job_spec(), owner="bob", now=at(1), source_format="native")
    ((recipe,),) = recipe_ids(seeded, job_id)
    set_id = seeded.jobs.load_job(job_id).sets[0].id
    s1 = seeded.conn.execute(select(Systems.id).where(Systems.fqdn == "s1.lab")).scalar_one()
    return {"r": recipe, "set": set_id, "s1": s1}


@pytest.mark.parametrize("write", IMPOSSIBLE.values(), ids=IMPOSSIBLE.keys())
def test_an_impossible_row_is_refused(seeded: Repository, ids: Ids, write: Write) -> None:
    with pytest.raises(IntegrityError), seeded.conn.begin_nested():
        write(seeded.conn, ids)


def test_a_possible_row_is_accepted(seeded: Repository, ids: Ids) -> None:
    # The same kind of direct write, legal this time: the checks are not just refusing all.
    with seeded.conn.begin_nested():
        _system(usage="idle")(seeded.conn, ids)
        _recipe(state="cancelled", finished_at=at(2))(seeded.conn, ids)
        _token()(seeded.conn, ids)
        _set(finished_at=at(2), stop_reason="cancelled before it started")(seeded.conn, ids)
        _set(lab_id=1, started_at=at(2), stop_reason="user")(seeded.conn, ids)
