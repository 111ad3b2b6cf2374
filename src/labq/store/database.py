"""Engines and schema migrations for the two supported databases.

SQLite (one file, WAL) is the embedded default; PostgreSQL (psycopg 3) is the
production store. ``upgrade`` runs the Alembic migrations shipped inside this
package, so it works from any working directory and from an installed wheel.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import platformdirs
from sqlalchemy import URL, Connection, Engine, create_engine, event, make_url, text
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlalchemy.pool import NullPool

from labq.errors import LabqError

if TYPE_CHECKING:
    from alembic.config import Config

ENV_VAR: Final = "LABQ_DB"
SQLITE_BUSY_TIMEOUT_S: Final = 30.0
READ_ONLY: Final = "labq_read_only"  # execution option: a SQLite read may begin DEFERRED
_PG_LOCK_ID: Final = 0x6C616271  # "labq": serialises concurrent upgrades on PostgreSQL


def default_url(data_dir: Path | None = None) -> str:
    """``$LABQ_DB``, else ``labq.db`` (SQLite) in the data directory: ``data_dir``, else
    ``$LABQ_DATA_DIR``, else the user's data directory (created if missing)."""
    url = os.environ.get(ENV_VAR)
    if url:
        return url
    data = data_dir or Path(os.environ.get("LABQ_DATA_DIR") or platformdirs.user_data_dir("labq"))
    data.mkdir(parents=True, exist_ok=True, mode=0o700)
    return f"sqlite:///{data / 'labq.db'}"


def normalise_url(url: str | URL) -> URL:
    """The URL with its driver made explicit: plain ``postgresql://`` means psycopg 3."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def make_engine(url: str | URL, **kwargs: Any) -> Engine:
    """An engine for labq's store; SQLite connections are set up for one writer at a time."""
    parsed = normalise_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(parsed, **kwargs)
    # sqlite3's ``timeout`` is SQLite's busy timeout: wait for the writer, don't fail.
    connect_args = {"timeout": SQLITE_BUSY_TIMEOUT_S, **kwargs.pop("connect_args", {})}
    engine = create_engine(parsed, connect_args=connect_args, **kwargs)
    event.listen(engine, "connect", _sqlite_connect)
    event.listen(engine, "begin", _sqlite_begin)
    return engine


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # SQLAlchemy's documented recipe: stop sqlite3 from issuing its own (deferred,
    # late) BEGIN so that we can issue ours, and so that SAVEPOINT works.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


def _sqlite_begin(conn: Connection) -> None:
    # IMMEDIATE takes the write lock up front: a transaction that reads and then
    # writes cannot fail half-way with "database is locked" (no lock upgrade).
    if conn.get_execution_options().get(READ_ONLY):
        conn.exec_driver_sql("BEGIN DEFERRED")
    else:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


# --- a PostgreSQL database that is not there yet -------------------------------

_MAINTENANCE: Final = ("postgres", "template1")  # databases every server has
_DUPLICATE_DATABASE: Final = "42P04"
_INSUFFICIENT_PRIVILEGE: Final = "42501"


def create_if_missing(url: str | URL) -> bool:
    """Create a PostgreSQL URL's database when the server has none of that name: True
    when it did. The role may lack the right: a :class:`LabqError` says who can and how.

    False for SQLite (which makes its file) and when no maintenance database lets us in:
    then connecting to the database itself tells what is wrong.
    """
    parsed = normalise_url(url)
    if parsed.get_backend_name() != "postgresql" or not parsed.database:
        return False
    for maintenance in _MAINTENANCE:
        engine = create_engine(
            parsed.set(database=maintenance), isolation_level="AUTOCOMMIT", poolclass=NullPool
        )
        try:
            with engine.connect() as conn:
                return _create(conn, parsed)
        except OperationalError:
            continue  # this one may not be open to the role: try the next
        finally:
            engine.dispose()
    return False


def _create(conn: Connection, url: URL) -> bool:
    name = str(url.database)
    found = conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name})
    if found.first() is not None:
        return False
    try:
        conn.exec_driver_sql(f"CREATE DATABASE {conn.dialect.identifier_preparer.quote(name)}")
    except ProgrammingError as exc:
        state = getattr(exc.orig, "sqlstate", None)
        if state == _DUPLICATE_DATABASE:
            return False  # another init made it meanwhile
        where = f"{url.host or 'localhost'}:{url.port or 5432}"
        role = url.username or "(the connecting role)"
        problem = "may not create it" if state == _INSUFFICIENT_PRIVILEGE else str(exc.orig)
        raise LabqError(
            f"database {name!r} does not exist on {where} and role {role!r} {problem}: as a"
            f" PostgreSQL superuser run createdb -h {url.host or 'localhost'}"
            f" -p {url.port or 5432} -O {url.username or '$USER'} {name}, then labq init again"
        ) from None
    return True


# --- migrations ----------------------------------------------------------------


def migrations_dir() -> Path:
    """Where the Alembic environment lives inside the installed package."""
    return Path(str(resources.files("labq.store") / "migrations"))


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic configuration for labq's migrations, optionally bound to a connection."""
    # Alembic is imported where it is used: a server or a supervisor that only opens the
    # database would pay a third of a second of CPU for it at every start
    from alembic.config import Config

    config = Config(str(migrations_dir() / "alembic.ini"))
    config.set_main_option("script_location", str(migrations_dir()))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest migration shipped with this version of labq."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "labq ships at least one migration"
    return str(head)


def shipped_head() -> str:
    """The newest migration's revision read from the versions' file names (``0014_….py``
    is revision ``0014``), without Alembic: tests check it is Alembic's own head."""
    names = (migrations_dir() / "versions").glob("[0-9][0-9][0-9][0-9]_*.py")
    return max(name.name[:4] for name in names)


def upgrade(url: str | URL, revision: str = "head") -> str:
    """Create or upgrade the schema to ``revision``; returns the revision reached.

    Safe to run again: an up-to-date database is left as it is, and read without Alembic
    (loading it and its fourteen scripts was a sixth of every server's start). Concurrent
    upgrades wait for one another (SQLite's write lock, a PostgreSQL advisory lock).
    """
    engine = make_engine(url)
    try:
        if revision == "head" and _stamped(engine) == shipped_head():
            return shipped_head()
        from alembic import command

        with migrating(engine) as conn:
            command.upgrade(alembic_config(conn), revision)
            return _revision_of(conn) or "base"
    finally:
        engine.dispose()


def downgrade(url: str | URL, revision: str) -> str:
    """Take the schema back to ``revision`` (``base`` drops everything labq made)."""
    from alembic import command

    engine = make_engine(url)
    try:
        with migrating(engine) as conn:
            command.downgrade(alembic_config(conn), revision)
            return _revision_of(conn) or "base"
    finally:
        engine.dispose()


def current_revision(url: str | URL) -> str | None:
    """The schema revision of a database, None when labq never migrated it."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return _revision_of(conn)
    finally:
        engine.dispose()


def _stamped(engine: Engine) -> str | None:
    """The revision ``alembic_version`` holds (Alembic's own table, one row), read with
    plain SQL; None when there is none or no such table."""
    try:
        with engine.connect() as conn:
            conn.execution_options(**{READ_ONLY: True})  # SQLite: no write lock for it
            rows = conn.exec_driver_sql("SELECT version_num FROM alembic_version").fetchall()
    except (OperationalError, ProgrammingError):
        return None  # no table: a new database
    return str(rows[0][0]) if len(rows) == 1 else None


def _revision_of(conn: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    rev = MigrationContext.configure(conn).get_current_revision()
    return None if rev is None else str(rev)


@contextmanager
def migrating(engine: Engine) -> Iterator[Connection]:
    """A connection for one migration run, in one transaction (DDL is transactional on both).

    ``upgrade``/``downgrade`` and the ``alembic`` command line both migrate through it.
    """
    with engine.connect() as conn:
        sqlite = engine.dialect.name == "sqlite"
        if sqlite:
            # Batch migrations rebuild tables; SQLite only lets foreign keys be
            # switched off outside a transaction. They are checked before commit.
            _pragma(conn, "foreign_keys=OFF")
        try:
            with conn.begin():
                if sqlite:
                    yield conn
                    _check_foreign_keys(conn)
                else:
                    conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_LOCK_ID})")
                    yield conn
        finally:
            if sqlite:
                _pragma(conn, "foreign_keys=ON")


def _pragma(conn: Connection, setting: str) -> None:
    # On the driver connection: going through SQLAlchemy would BEGIN first.
    driver = conn.connection.driver_connection
    assert driver is not None, "an open connection has a driver connection"
    driver.execute(f"PRAGMA {setting}")


def _check_foreign_keys(conn: Connection) -> None:
    broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if broken:
        raise RuntimeError(f"migration left rows with broken foreign keys: {broken[:5]}")
