"""The schema: migrations reach head, match the metadata, run twice, go down and up."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata, produce_migrations, render_python_code
from alembic.runtime.migration import MigrationContext
from sqlalchemy import CheckConstraint, inspect, select, text

from labq.domain.states import RecipeState
from labq.store import current_revision, downgrade, head_revision, make_engine, reading, upgrade
from labq.store.columns import render_item
from labq.store.database import default_url, shipped_head
from labq.store.tables import Base, Groups

from .conftest import Database, at


def test_migrations_reach_head_and_upgrade_is_idempotent(db: Database) -> None:
    assert current_revision(db.url) == head_revision()
    assert upgrade(db.url) == head_revision()
    assert upgrade(db.url) == head_revision()


def test_the_head_read_from_file_names_is_alembics() -> None:
    """An up-to-date database is recognised without Alembic by this: a migration named out
    of the ``NNNN_`` order would leave databases behind."""
    assert shipped_head() == head_revision()


def test_a_database_one_behind_is_upgraded_not_taken_for_up_to_date(db: Database) -> None:
    previous = str(int(head_revision()) - 1).zfill(4)
    assert downgrade(db.url, previous) == previous
    assert upgrade(db.url) == head_revision()
    assert current_revision(db.url) == head_revision()


def test_autogenerate_finds_no_difference_from_the_metadata(db: Database) -> None:
    with db.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []


def test_check_constraints_carry_the_names_of_the_metadata(db: Database) -> None:
    # Autogenerate does not compare CHECKs; names are how a later migration finds them.
    with db.engine.connect() as conn:
        inspector = inspect(conn)
        for table in Base.metadata.sorted_tables:
            declared = {c.name for c in table.constraints if isinstance(c, CheckConstraint)}
            found = {c["name"] for c in inspector.get_check_constraints(table.name)}
            assert found == declared, table.name


def test_downgrade_to_base_and_back(db: Database) -> None:
    assert downgrade(db.url, "base") == "base"
    with db.engine.connect() as conn:
        assert set(inspect(conn).get_table_names()) <= {"alembic_version"}
    assert upgrade(db.url) == head_revision()


def test_the_migration_creates_the_everybody_group(db: Database) -> None:
    with db.engine.connect() as conn:
        assert list(conn.execute(select(Groups.name)).scalars()) == ["everybody"]


def test_a_fresh_sqlite_file_is_created_and_migrated(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    assert current_revision(url) is None
    assert upgrade(url) == head_revision()
    assert current_revision(url) == head_revision()


def test_default_url_prefers_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABQ_DB", "postgresql://db.example/labq")
    assert default_url() == "postgresql://db.example/labq"


def test_default_url_is_a_sqlite_file_in_the_user_data_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("LABQ_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    url = default_url()
    assert url == f"sqlite:///{tmp_path / 'data' / 'labq' / 'labq.db'}"
    assert (tmp_path / "data" / "labq").is_dir()


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_plain_postgresql_urls_use_psycopg_3(scheme: str) -> None:
    engine = make_engine(f"{scheme}://postgres@127.0.0.1:1/none")
    assert engine.dialect.driver == "psycopg"
    engine.dispose()


def test_autogenerate_writes_migrations_that_need_no_labq_import(tmp_path: Path) -> None:
    # What `alembic revision --autogenerate` would write for the whole schema.
    engine = make_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    with engine.connect() as conn:
        context = MigrationContext.configure(conn)
        ops = produce_migrations(context, Base.metadata).upgrade_ops
        assert ops is not None
        code = render_python_code(ops, render_item=render_item)
    engine.dispose()
    assert "labq" not in code
    assert "sa.DateTime(timezone=True)" in code
    compile(f"def upgrade():\n{code}", "<migration>", "exec")


def test_0002_fills_in_what_it_adds_for_existing_rows(db: Database) -> None:
    downgrade(db.url, "0001")
    rows = [
        "INSERT INTO users (id, name, admin) VALUES (1, 'bob', false)",
        "INSERT INTO jobs (id, owner_id, submitted_at, source_format, depends, metadata, spec)"
        " VALUES (1, 1, :t1, 'native', '[]', '{}', '{}')",
        "INSERT INTO recipe_sets (id, job_id, position, priority, max_retries, locks, attempt)"
        " VALUES (1, 1, 0, 'normal', 0, '{}', 1), (2, 1, 1, 'normal', 0, '{}', 1)",
        "INSERT INTO recipes (id, recipe_set_id, position, host, state, metadata, finished_at)"
        " VALUES (1, 1, 0, '{}', 'cancelled', '{}', :t2), (2, 2, 0, '{}', 'queued', '{}', NULL)",
        "INSERT INTO tasks (id, recipe_id, position, name, params, status)"
        " VALUES (1, 1, 0, 't', '{}', 'cancelled'), (2, 2, 0, 't', '{}', 'new')",
    ]
    engine = make_engine(db.url)
    with engine.begin() as conn:
        for sql in rows:
            conn.execute(text(sql), {"t1": at(1), "t2": at(2)})
    engine.dispose()
    assert upgrade(db.url) == head_revision()
    with reading(db.engine) as repo:
        ended, waiting = repo.jobs.load_job(1).sets
        assert (ended.submitted_at, ended.finished_at) == (at(1), at(2))
        assert (waiting.submitted_at, waiting.finished_at) == (at(1), None)
        assert [u.id for u in repo.restore.unfinished_sets()] == [2]
        assert [(h.state, h.at) for h in repo.moves.recipe_history(1)] == [
            (RecipeState.NEW, at(1)),
            (RecipeState.CANCELLED, at(2)),
        ]
        assert [h.state for h in repo.moves.recipe_history(2)] == [
            RecipeState.NEW,
            RecipeState.QUEUED,
        ]
        assert ended.recipes[0].tasks[0].finished_at == at(2)
        assert repo.people.get_user("bob").name == "bob"
