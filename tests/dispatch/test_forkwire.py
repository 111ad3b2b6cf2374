"""A fork server preloads the driver of its own server's database, and no other; SSH's library
only where a lab reaches its systems or VMs over SSH."""

from __future__ import annotations

import pytest

from labq.config import Settings
from labq.dispatch.dispatcher import backends_preload
from labq.dispatch.forkwire import DRIVERS, SSH_PRELOAD, drivers_of

from .conftest import COMMAND_VMS


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


@pytest.mark.parametrize(
    ("labs", "preloaded"),
    [
        ({}, ()),
        ({"lab1": {"backend": "local"}}, ()),
        ({"lab1": {}, "lab2": {"backend": "ssh", "ssh": {"user": "root"}}}, SSH_PRELOAD),
        ({"lab1": {"vms": COMMAND_VMS}}, SSH_PRELOAD),
    ],
)
def test_ssh_is_preloaded_only_for_a_lab_reached_over_ssh(
    labs: dict[str, object], preloaded: tuple[str, ...]
) -> None:
    assert backends_preload(Settings.model_validate({"labs": labs})) == preloaded
