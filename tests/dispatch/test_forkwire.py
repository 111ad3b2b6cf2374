"""A fork server preloads the driver of its own server's database, and no other."""

from __future__ import annotations

import pytest

from labq.dispatch.forkwire import DRIVERS, drivers_of


@pytest.mark.parametrize(
    ("url", "backend"),
    [
        ("sqlite:////var/lib/labq/labq.db", "sqlite"),
        ("sqlite+pysqlite:///labq.db", "sqlite"),
        ("postgresql+psycopg://labq:secret@db.example.com:5432/labq", "postgresql"),
        ("postgresql://db.example.com/labq", "postgresql"),
    ],
)
def test_the_drivers_are_those_of_the_servers_database(url: str, backend: str) -> None:
    assert drivers_of(url) == DRIVERS[backend]


def test_a_url_nobody_can_read_preloads_nothing() -> None:
    assert drivers_of("not a url") == ()
    assert drivers_of("mysql://db.example.com/labq") == ()
