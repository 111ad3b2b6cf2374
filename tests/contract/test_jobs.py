"""Submitting jobs in one transaction, loading them back, deriving states, cancelling."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from typing import Any

import pytest
from sqlalchemy import Connection, event, func, select
from sqlalchemy.exc import DBAPIError

from labq.domain.job import JobSpec
from labq.domain.states import RecipeState, Usage
from labq.errors import InputError, NotFoundError
from labq.store import Repository
from labq.store.supervisors import Beat
from labq.store.tables import Activity, Jobs, RecipeExcludes, Recipes, RecipeSets, Tasks

from .conftest import at, job_spec, recipe_ids

FULL = {
    "whiteboard": "network smoke test",
    "group": "kernel-qe",
    "depends": [7, "nightly"],
    "ref": {"repo": "https://git.example/tests.git", "branch": "main", "commit": "abcdef1"},
    "metadata": {"ticket": "QE-1"},
    "recipe_sets": [
        {
            "priority": "high",
            "max_retries": 2,
            "max_time": 1800,
            "locks": {"network": {"exclusive": ["vlan-12"]}, "pool": {"shared": "unknown"}},
            "recipes": [
                {
                    "role": "server",
                    "host": {"arch": "x86_64", "memory_mb": {">=": 4096}, "pool": "perf"},
                    "tasks": [
                        {"name": "setup", "run": "./setup.sh", "timeout": 300},
                        {"name": "serve", "run": "iperf3 -s", "params": {"PORT": 5201}},
                    ],
                    "metadata": {"k": [1, 2]},
                },
                {
                    "role": "client",
                    "host": {"or": [{"machine_type": "smithi"}, {"machine_type": "mira"}]},
                    "exclude": ["a.lab", "b.lab"],
                    "force": None,
                    "whiteboard": "the client",
                    "tasks": [
                        {"name": "measure", "role": "client"},
                        {"fetch": {"url": "git://git.example/tasks.git?main#net/ping"}},
                    ],
                    "guests": [
                        {
                            "name": "vm1",
                            "args": "--ram=1024",
                            "role": "guests",
                            "tasks": [
                                {"name": "install"},
                                {"name": "t", "fetch": {"url": "file:///t", "subdir": "a"}},
                            ],
                            "metadata": {"host_requires": {"system_type": "Virtual"}},
                        },
                        {"tasks": [{"name": "check"}]},
                    ],
                },
            ],
        },
        {"priority": "low", "recipes": [{"force": "s3.lab"}]},
    ],
}
STORED = (Jobs, RecipeSets, Recipes, RecipeExcludes, Tasks)


def counts(conn: Connection) -> dict[str, int]:
    out = {
        t.__tablename__: conn.execute(select(func.count()).select_from(t)).scalar_one()
        for t in STORED
    }
    jobs_logged = select(func.count()).where(Activity.object_kind == "job")
    out["activity"] = conn.execute(jobs_logged).scalar_one()
    return out


def test_a_job_is_stored_whole_and_loads_back_equal(seeded: Repository) -> None:
    spec = JobSpec.model_validate(FULL)
    job_id = seeded.queue.submit_job(spec, owner="alice", now=at(5), source_format="native")
    view = seeded.jobs.load_job(job_id)
    assert view.spec == spec.model_copy(update={"owner": "alice"})
    assert (view.owner, view.group, view.submitted_at, view.source_format) == (
        "alice",
        "kernel-qe",
        at(5),
        "native",
    )
    assert [len(s.recipes) for s in view.sets] == [2, 1]
    assert all(r.state is RecipeState.NEW for s in view.sets for r in s.recipes)
    assert view.state is RecipeState.NEW
    assert counts(seeded.conn) == {
        "jobs": 1,
        "recipe_sets": 2,
        "recipes": 3,
        "recipe_excludes": 2,
        "tasks": 7,
        "activity": 1,
    }
    audit = seeded.conn.execute(select(Jobs.spec).where(Jobs.id == job_id)).scalar_one()
    assert audit == spec.canonical()
    # a guest's tasks are its host recipe's task rows, each saying which guest it is
    client = view.sets[0].recipes[1]
    assert [(t.name, t.guest) for t in client.tasks] == [
        ("measure", None),
        ("/git.example/tasks.git/net/ping", None),
        ("install", "vm1"),
        ("t", "vm1"),
        ("check", "guest2"),
    ]


def test_metadata_is_stored_in_its_json_form(seeded: Repository) -> None:
    # YAML reads `2026-01-01` as a date; the canonical (JSON) form is what is stored.
    spec = job_spec(metadata={"due": date(2026, 1, 1)})
    job_id = seeded.queue.submit_job(spec, owner="bob", now=at(1), source_format="native")
    assert seeded.jobs.load_job(job_id).spec.metadata == {"due": "2026-01-01"}


def test_a_job_without_a_group_counts_as_everybody(seeded: Repository) -> None:
    job_id = seeded.queue.submit_job(job_spec(), owner="bob", now=at(1), source_format="beaker")
    assert seeded.jobs.load_job(job_id).group is None
    everybody = job_spec(group="everybody")
    assert seeded.queue.submit_job(everybody, owner="bob", now=at(1), source_format="native")


@pytest.mark.parametrize(
    ("owner", "group", "error"),
    [
        ("bob", "kernel-qe", InputError),  # not a member
        ("alice", "no-such-group", InputError),
        ("nobody", None, NotFoundError),
    ],
)
def test_a_refused_submit_stores_nothing(
    seeded: Repository, owner: str, group: str | None, error: type[Exception]
) -> None:
    before = counts(seeded.conn)
    spec = JobSpec.model_validate({**FULL, "group": group})
    with pytest.raises(error):
        seeded.queue.submit_job(spec, owner=owner, now=at(1), source_format="native")
    assert counts(seeded.conn) == before


@contextmanager
def duplicate_before(conn: Connection, statement: str) -> Iterator[None]:
    """Make the database fail just before ``statement``: a duplicate the schema refuses."""

    def collide(_conn: Any, cursor: Any, sql: str, *_args: Any) -> None:
        if sql.startswith(statement):
            cursor.execute("INSERT INTO groups (name) VALUES ('everybody')")

    event.listen(conn, "before_cursor_execute", collide)
    try:
        yield
    finally:
        event.remove(conn, "before_cursor_execute", collide)


def test_a_database_error_half_way_stores_nothing(seeded: Repository) -> None:
    before = counts(seeded.conn)
    spec = JobSpec.model_validate(FULL)
    with duplicate_before(seeded.conn, "INSERT INTO tasks"), pytest.raises(DBAPIError):
        seeded.queue.submit_job(spec, owner="alice", now=at(1), source_format="native")
    assert counts(seeded.conn) == before
    # The transaction is still usable (PostgreSQL too): the savepoint took the blow.
    assert seeded.queue.submit_job(spec, owner="alice", now=at(2), source_format="native")


def test_set_and_job_states_are_derived_from_the_recipes(seeded: Repository) -> None:
    job_id = seeded.queue.submit_job(job_spec(2, 1), owner="bob", now=at(1), source_format="native")
    (a, b), (c,) = recipe_ids(seeded, job_id)
    sets = [s.id for s in seeded.jobs.load_job(job_id).sets]
    seeded.moves.move_recipe(a, RecipeState.QUEUED, now=at(2))
    assert seeded.jobs.recipe_set_state(sets[0]) is RecipeState.NEW
    seeded.moves.move_recipe(b, RecipeState.QUEUED, now=at(2))
    seeded.moves.move_recipe(c, RecipeState.SCHEDULED, now=at(2), system="s1.lab")
    assert seeded.jobs.recipe_set_state(sets[0]) is RecipeState.QUEUED
    assert seeded.jobs.recipe_set_state(sets[1]) is RecipeState.SCHEDULED
    assert seeded.jobs.job_state(job_id) is RecipeState.QUEUED
    for recipe in (a, b):
        seeded.moves.move_recipe(recipe, RecipeState.CANCELLED, now=at(3))
    seeded.moves.move_recipe(c, RecipeState.ABORTED, now=at(3))
    view = seeded.jobs.load_job(job_id)
    assert [s.state for s in view.sets] == [RecipeState.CANCELLED, RecipeState.ABORTED]
    assert view.state is seeded.jobs.job_state(job_id) is RecipeState.ABORTED
    with pytest.raises(NotFoundError):
        seeded.jobs.job_state(job_id + 1)


def test_cancelling_a_job_cancels_what_is_unfinished_and_frees_systems(
    seeded: Repository,
) -> None:
    job_id = seeded.queue.submit_job(job_spec(2), owner="bob", now=at(1), source_format="native")
    ((a, _),) = recipe_ids(seeded, job_id)
    seeded.moves.move_recipe(a, RecipeState.SCHEDULED, now=at(2), system="s1.lab")
    assert seeded.queue.cancel_job(job_id, actor="bob", now=at(3), reason="wrong kernel") == 2
    assert seeded.queue.cancel_job(job_id, actor="bob", now=at(4)) == 0
    assert seeded.jobs.job_state(job_id) is RecipeState.CANCELLED
    assert seeded.systems.get_system("s1.lab").usage is Usage.PENDING
    entry = seeded.log.activity(kind="job", object_id=job_id)[0]
    assert (entry.action, entry.actor, entry.reason) == ("cancel", "bob", "wrong kernel")
    with pytest.raises(NotFoundError):
        seeded.queue.cancel_job(job_id + 1, actor="bob", now=at(5))


def test_a_started_set_is_asked_to_stop_and_keeps_the_reason(seeded: Repository) -> None:
    job_id = seeded.queue.submit_job(job_spec(1, 1), owner="bob", now=at(1), source_format="native")
    (running,), (waiting,) = recipe_ids(seeded, job_id)
    started = seeded.jobs.load_job(job_id).sets[0].id
    seeded.moves.move_recipe(running, RecipeState.SCHEDULED, now=at(2), system="s1.lab")
    seeded.supervisors.start_recipe_set(started, lab="lab1", now=at(2), claim="c")
    seeded.supervisors.confirm_claim(started, "c", 7, "h", now=at(2))
    for state in (RecipeState.WAITING, RecipeState.INSTALLING, RecipeState.RUNNING):
        seeded.moves.move_recipe(running, state, now=at(3))
    seeded.moves.move_recipe(waiting, RecipeState.QUEUED, now=at(3))
    assert seeded.queue.cancel_job(job_id, actor="bob", now=at(4), reason="wrong kernel") == 2
    assert seeded.queue.cancel_job(job_id, actor="bob", now=at(5), reason="again") == 0
    # the supervisor stops the running recipe and ends it; the queued one ended at once
    assert seeded.moves.recipe_state(running) is RecipeState.RUNNING
    assert seeded.systems.get_system("s1.lab").recipe == running
    assert seeded.supervisors.heartbeat(started, now=at(5), claim="c") is Beat.STOP
    assert seeded.moves.recipe_state(waiting) is RecipeState.CANCELLED
    assert [s.stop_reason for s in seeded.jobs.load_job(job_id).sets] == ["wrong kernel"] * 2
    (never_ran,) = seeded.jobs.get_recipe(waiting).tasks
    assert (never_ran.status, never_ran.result) == ("cancelled", None)
    assert never_ran.message == "never ran: its recipe was cancelled"
    seeded.moves.move_recipe(running, RecipeState.CANCELLED, now=at(6), reason="wrong kernel")
    assert seeded.jobs.job_state(job_id) is RecipeState.CANCELLED
    assert seeded.queue.cancel_job(job_id, actor="bob", now=at(7)) == 0
