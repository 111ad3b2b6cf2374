import os
import sqlite3

import pytest
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.exc import OperationalError

from tests.acceptance.conftest import PG_URL


def test_init_creates_the_default_sqlite_database_in_the_data_directory(labq, tmp_path):
    result = labq("init")
    assert result.returncode == 0, result.stderr
    db = tmp_path / "data" / "labq" / "labq.db"
    assert db.exists()
    assert "database ready" in result.stdout
    with sqlite3.connect(db) as conn:
        tables = {
            row[0] for row in conn.execute("select name from sqlite_master where type='table'")
        }
        assert {"systems", "jobs", "recipe_sets", "recipes", "tasks", "usage_history"} <= tables
        assert conn.execute("pragma journal_mode").fetchone()[0] == "wal"


def test_init_twice_is_an_upgrade_not_an_error(labq, tmp_path):
    url = f"sqlite:///{tmp_path / 'twice.db'}"
    first = labq("init", "--db", url)
    second = labq("init", "--db", url)
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert "(schema " in second.stdout
    assert (
        first.stdout.split("schema")[1].split(")")[0]
        == second.stdout.split("schema")[1].split(")")[0]
    )


def test_init_honours_labq_db(labq, tmp_path):
    target = tmp_path / "from-env.db"
    result = labq("init", env={"LABQ_DB": f"sqlite:///{target}"})
    assert result.returncode == 0, result.stderr
    assert target.exists()


def test_init_with_a_bad_url_is_a_plain_error(labq):
    result = labq("init", "--db", "nosuchdb://x")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("labq: ")


def test_init_creates_the_first_admin_once_and_shows_the_token_once(labq, tmp_path):
    url = f"sqlite:///{tmp_path / 'admin.db'}"
    first = labq("init", "--db", url, "--admin", "root")
    assert first.returncode == 0, first.stderr
    token = first.stdout.strip().splitlines()[-1]
    assert token.startswith("lq_")
    second = labq("init", "--db", url)
    assert token not in second.stdout
    assert "created the first admin" not in second.stdout
    with sqlite3.connect(tmp_path / "admin.db") as conn:
        users = conn.execute("select name, admin from users").fetchall()
        digests = [row[0] for row in conn.execute("select digest from tokens")]
    assert users == [("root", 1)]
    assert token not in digests  # only a digest is stored


# --- PostgreSQL: a database that is not there yet ------------------------------------


@pytest.fixture
def pg_admin():
    """An AUTOCOMMIT engine on the test server (skipped without one, failed under CI)."""
    admin = create_engine(make_url(PG_URL), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text("SELECT 1"))
    except OperationalError as exc:
        admin.dispose()
        if os.environ.get("CI") == "true":
            pytest.fail(f"no PostgreSQL at {PG_URL}: {exc.orig}")
        pytest.skip(f"no PostgreSQL at {PG_URL}")
    yield admin
    admin.dispose()


def _exists(admin, name: str) -> bool:
    with admin.connect() as conn:
        found = conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name})
        return found.first() is not None


@pytest.mark.postgres
def test_init_creates_a_missing_postgresql_database(labq, pg_admin):
    name = f"labq_init_{os.getpid()}"
    url = make_url(PG_URL).set(drivername="postgresql", database=name)
    assert not _exists(pg_admin, name)
    try:
        result = labq("init", "--db", url.render_as_string(hide_password=False))
        assert result.returncode == 0, result.stderr
        assert _exists(pg_admin, name)
        assert result.stdout.startswith("created the database ")
        assert "database ready" in result.stdout
        assert result.stdout.strip().splitlines()[-1].startswith("lq_")
        again = labq("init", "--db", url.render_as_string(hide_password=False))
        assert again.returncode == 0, again.stderr
        assert "created the database" not in again.stdout
    finally:
        with pg_admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.mark.postgres
def test_init_says_how_when_the_role_may_not_create_the_database(labq, pg_admin):
    role, name = f"labq_nocreate_{os.getpid()}", f"labq_init_denied_{os.getpid()}"
    with pg_admin.connect() as conn:
        conn.execute(text(f'CREATE ROLE "{role}" LOGIN NOCREATEDB'))
    try:
        url = make_url(PG_URL).set(drivername="postgresql", username=role, password=None)
        probe = create_engine(url.set(drivername="postgresql+psycopg", database="postgres"))
        try:
            with probe.connect():
                pass
        except OperationalError:
            pytest.skip("the server does not let a new role in without a password")
        finally:
            probe.dispose()
        result = labq("init", "--db", url.set(database=name).render_as_string())
        assert result.returncode == 2
        assert "Traceback" not in result.stderr
        assert result.stderr.count("\n") == 1, result.stderr
        assert f"database '{name}' does not exist" in result.stderr
        assert f"-O {role} {name}" in result.stderr  # the createdb command to run
        assert not _exists(pg_admin, name)
    finally:
        with pg_admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            conn.execute(text(f'DROP ROLE IF EXISTS "{role}"'))
