"""Alembic environment: runs on a connection labq hands over, or on ``$LABQ_DB``."""

from __future__ import annotations

from logging.config import fileConfig
from typing import Any

from alembic import context
from sqlalchemy import Connection

from labq.store.columns import render_item
from labq.store.database import default_url, make_engine, migrating
from labq.store.tables import Base

config = context.config
target_metadata = Base.metadata


def _configure(**kwargs: Any) -> None:
    context.configure(
        target_metadata=target_metadata, compare_type=True, render_item=render_item, **kwargs
    )


def _run(connection: Connection) -> None:
    # SQLite cannot ALTER most things: batch mode rebuilds the table instead. Its DDL
    # is transactional too once labq issues BEGIN itself (database.make_engine).
    sqlite = connection.dialect.name == "sqlite"
    _configure(connection=connection, render_as_batch=sqlite, transactional_ddl=True)
    with context.begin_transaction():
        context.run_migrations()


def run_offline() -> None:
    """Print the SQL instead of running it (``alembic upgrade head --sql``)."""
    _configure(url=config.get_main_option("sqlalchemy.url") or default_url(), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    """Migrate through the connection labq passed in, else through a new engine."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    # Only the alembic command line configures logging; labq keeps its own.
    if config.config_file_name is not None:
        fileConfig(config.config_file_name, disable_existing_loggers=False)
    engine = make_engine(config.get_main_option("sqlalchemy.url") or default_url())
    try:
        with migrating(engine) as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
