"""Guarded recipe moves: the system follows, the history grows, races get ConflictError."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import Connection, event

from labq.domain.states import Condition, RecipeState, Usage
from labq.errors import ConflictError, IllegalTransition, NotFoundError
from labq.store import Repository, epoch, reading, transaction

from .conftest import Database, at, job_spec, recipe_ids, seed

LIFE = [
    RecipeState.QUEUED,
    RecipeState.SCHEDULED,
    RecipeState.WAITING,
    RecipeState.INSTALLING,
    RecipeState.RUNNING,
    RecipeState.COMPLETED,
]


def submit(repo: Repository, *sizes: int) -> list[int]:
    job_id = repo.queue.submit_job(job_spec(*sizes), owner="bob", now=at(1), source_format="native")
    return [r for s in recipe_ids(repo, job_id) for r in s]


@contextmanager
def behind_the_back(conn: Connection, before: str, *changes: str) -> Iterator[None]:
    """Run ``changes`` on the raw connection just before the first ``before`` statement.

    This is another writer that got in between the repository's read and its
    guarded update; on a single connection it needs no threads and no timing.
    """
    fired = False

    def interfere(_conn: Any, cursor: Any, sql: str, *_args: Any) -> None:
        nonlocal fired
        if not fired and sql.startswith(before):
            fired = True
            for change in changes:
                cursor.execute(change)

    event.listen(conn, "before_cursor_execute", interfere)
    try:
        yield
    finally:
        event.remove(conn, "before_cursor_execute", interfere)
    assert fired


def test_a_recipe_lives_and_its_system_follows(seeded: Repository) -> None:
    (recipe,) = submit(seeded, 1)
    usages = []
    for step, target in enumerate(LIFE, start=10):
        assert seeded.moves.move_recipe(recipe, target, now=at(step), system="s1.lab")
        usages.append(seeded.systems.get_system("s1.lab").usage)
    assert usages == [
        Usage.PENDING,  # queued: no system yet
        Usage.SCHEDULED,
        Usage.WAITING,
        Usage.INSTALLING,
        Usage.RUNNING,
        Usage.PENDING,  # finished: free again, for the pending-system event
    ]
    history = seeded.systems.usage_history("s1.lab")
    assert [(r.usage, r.recipe) for r in history[1:]] == [
        (Usage.PENDING, None),
        (Usage.SCHEDULED, recipe),
        (Usage.WAITING, recipe),
        (Usage.INSTALLING, recipe),
        (Usage.RUNNING, recipe),
        (Usage.PENDING, None),
    ]
    assert [r.start for r in history[2:]] == [epoch(at(s)) for s in range(11, 16)]
    assert all(r.end == n.start for r, n in itertools.pairwise(history))
    view = seeded.jobs.get_recipe(recipe)
    assert (view.state, view.system) == (RecipeState.COMPLETED, "s1.lab")  # where it ran
    assert (view.queued_at, view.scheduled_at, view.started_at, view.finished_at) == (
        at(10),
        at(11),
        at(14),
        at(15),
    )
    assert seeded.systems.get_system("s1.lab").recipe is None


def test_an_illegal_move_raises_and_changes_nothing(seeded: Repository) -> None:
    (recipe,) = submit(seeded, 1)
    before = seeded.systems.usage_history("s1.lab")
    with pytest.raises(IllegalTransition):
        seeded.moves.move_recipe(recipe, RecipeState.RUNNING, now=at(2), system="s1.lab")
    with pytest.raises(IllegalTransition):
        seeded.moves.move_recipe(recipe, RecipeState.SCHEDULED, now=at(2))  # no system named
    assert seeded.moves.recipe_state(recipe) is RecipeState.NEW
    assert seeded.systems.usage_history("s1.lab") == before
    with pytest.raises(NotFoundError):
        seeded.moves.move_recipe(recipe + 100, RecipeState.QUEUED, now=at(2))


def test_a_repeated_move_is_a_no_op(seeded: Repository) -> None:
    (recipe,) = submit(seeded, 1)
    assert seeded.moves.move_recipe(recipe, RecipeState.SCHEDULED, now=at(2), system="s1.lab")
    before = seeded.systems.usage_history("s1.lab")
    assert not seeded.moves.move_recipe(recipe, RecipeState.SCHEDULED, now=at(3), system="s2.lab")
    assert seeded.systems.usage_history("s1.lab") == before
    assert seeded.systems.get_system("s2.lab").recipe is None
    assert seeded.jobs.get_recipe(recipe).scheduled_at == at(2)


def test_two_recipes_cannot_take_one_system(seeded: Repository) -> None:
    first, second = submit(seeded, 2)
    seeded.moves.move_recipe(first, RecipeState.SCHEDULED, now=at(2), system="s1.lab")
    with pytest.raises(ConflictError, match="already serves"):
        seeded.moves.move_recipe(second, RecipeState.SCHEDULED, now=at(3), system="s1.lab")
    assert seeded.moves.recipe_state(second) is RecipeState.NEW
    assert seeded.systems.get_system("s1.lab").recipe == first


def test_a_system_taken_under_us_undoes_the_whole_move(seeded: Repository) -> None:
    first, second = submit(seeded, 2)
    s1 = seeded.systems.get_system("s1.lab")
    assert s1.recipe is None
    taken = [
        f"UPDATE recipes SET state = 'scheduled', system_id = (SELECT id FROM systems"
        f" WHERE fqdn = 's1.lab') WHERE id = {first}",
        f"UPDATE systems SET usage = 'scheduled', recipe_id = {first} WHERE fqdn = 's1.lab'",
    ]
    # The second recipe's own update goes through, then the system's guard fails.
    with behind_the_back(seeded.conn, "UPDATE recipes", *taken), pytest.raises(ConflictError):
        seeded.moves.move_recipe(second, RecipeState.SCHEDULED, now=at(3), system="s1.lab")
    assert seeded.moves.recipe_state(second) is RecipeState.NEW


def test_a_stale_recipe_gets_a_conflict(seeded: Repository) -> None:
    (recipe,) = submit(seeded, 1)
    seeded.moves.move_recipe(recipe, RecipeState.SCHEDULED, now=at(2), system="s1.lab")
    before = seeded.systems.usage_history("s1.lab")
    release = f"UPDATE recipes SET state = 'assigned', system_id = NULL WHERE id = {recipe}"
    with behind_the_back(seeded.conn, "UPDATE recipes", release), pytest.raises(ConflictError):
        seeded.moves.move_recipe(recipe, RecipeState.WAITING, now=at(3))
    assert seeded.systems.usage_history("s1.lab") == before


def test_a_racing_mover_that_got_there_first_makes_ours_a_no_op(seeded: Repository) -> None:
    (recipe,) = submit(seeded, 1)
    queued = f"UPDATE recipes SET state = 'queued', queued_at = queued_at WHERE id = {recipe}"
    with behind_the_back(seeded.conn, "UPDATE recipes", queued):
        assert not seeded.moves.move_recipe(recipe, RecipeState.QUEUED, now=at(2))
    assert seeded.moves.recipe_state(recipe) is RecipeState.QUEUED


def test_a_held_recipe_let_go_frees_its_system(seeded: Repository) -> None:
    (recipe,) = submit(seeded, 1)
    seeded.moves.move_recipe(recipe, RecipeState.SCHEDULED, now=at(2), system="s1.lab")
    seeded.moves.move_recipe(recipe, RecipeState.ASSIGNED, now=at(3))
    view = seeded.jobs.get_recipe(recipe)
    assert (view.state, view.system) == (RecipeState.ASSIGNED, None)
    system = seeded.systems.get_system("s1.lab")
    assert (system.usage, system.recipe) == (Usage.PENDING, None)


def test_a_system_broken_while_busy_goes_idle_when_its_recipe_ends(seeded: Repository) -> None:
    (recipe,) = submit(seeded, 1)
    for target in LIFE[1:5]:
        seeded.moves.move_recipe(recipe, target, now=at(2), system="s1.lab")
    seeded.systems.set_condition("s1.lab", Condition.BROKEN, now=at(3), actor="carol")
    assert seeded.systems.get_system("s1.lab").usage is Usage.RUNNING
    with pytest.raises(IllegalTransition):
        seeded.systems.set_usage("s1.lab", Usage.IDLE, now=at(4))
    seeded.moves.move_recipe(recipe, RecipeState.ABORTED, now=at(5))
    system = seeded.systems.get_system("s1.lab")
    assert (system.usage, system.condition, system.recipe) == (Usage.IDLE, Condition.BROKEN, None)


def test_two_schedulers_racing_for_one_system_cannot_both_win(db: Database) -> None:
    with transaction(db.engine) as repo:
        seed(repo)
        first, second = submit(repo, 2)
    outcome: list[str] = []

    def rival() -> None:
        try:
            with transaction(db.engine) as repo:
                repo.moves.move_recipe(second, RecipeState.SCHEDULED, now=at(3), system="s1.lab")
            outcome.append("took it")
        except ConflictError:
            outcome.append("conflict")

    with db.engine.connect() as conn:
        tx = conn.begin()
        Repository(conn).moves.move_recipe(first, RecipeState.SCHEDULED, now=at(2), system="s1.lab")
        thread = threading.Thread(target=rival)
        thread.start()
        # The rival now waits: for the row lock (PostgreSQL) or the write lock (SQLite).
        time.sleep(0.3)
        tx.commit()
    thread.join(timeout=30)
    assert outcome == ["conflict"]
    with reading(db.engine) as repo:
        assert repo.systems.get_system("s1.lab").recipe == first
        assert repo.moves.recipe_state(second) is RecipeState.NEW
