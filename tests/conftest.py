"""What tests of several layers share: a PostgreSQL server with a migrated template.

PostgreSQL: migrated once into ``labq_template_<pid>``; each test that asks gets
a fresh ``CREATE DATABASE … TEMPLATE`` copy, dropped afterwards. No server:
skipped on a laptop, failed under ``CI=true``.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import URL, Engine, create_engine, make_url, text
from sqlalchemy.exc import OperationalError

from labq.store import upgrade

# pytest-xdist's workers get COLUMNS=80 and LINES=24 from somewhere in their start-up; the
# labq commands the tests run piped would take them as the width their tables must fit.
# A test that wants a width sets COLUMNS itself.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)

PG_URL = os.environ.get("LABQ_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
_copies = itertools.count()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[tuple[Engine, str]]:
    """An AUTOCOMMIT engine on the server and the name of the migrated template."""
    admin = create_engine(
        make_url(PG_URL).set(drivername="postgresql+psycopg"), isolation_level="AUTOCOMMIT"
    )
    try:
        with admin.connect() as conn:
            conn.execute(text("SELECT 1"))
    except OperationalError as exc:
        admin.dispose()
        message = f"no PostgreSQL at {PG_URL}: {exc.orig}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    template = f"labq_template_{os.getpid()}"
    drop_database(admin, template)
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{template}"'))
    upgrade(admin.url.set(database=template))
    yield admin, template
    drop_database(admin, template)
    admin.dispose()


@contextmanager
def pg_copy(server: tuple[Engine, str]) -> Iterator[URL]:
    """A fresh copy of the template for one test; its URL, dropped afterwards."""
    admin, template = server
    name = f"labq_test_{os.getpid()}_{next(_copies)}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{template}"'))
    try:
        yield admin.url.set(database=name)
    finally:
        drop_database(admin, name)


def drop_database(admin: Engine, name: str) -> None:
    """Drop a database, whoever is still connected to it."""
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


# Modules whose tests must share one worker under pytest-xdist (scripts/test runs two with
# --dist loadgroup; every other test goes wherever a worker is free): one sshd per module,
# and the dynamic task uids of the isolation tests, which two servers would hand out twice.
ONE_WORKER = {
    "tests/dispatch/test_ssh.py": "sshd",
    "tests/dispatch/test_vms.py": "vms",  # one VM at a time: TCG wants both cores
    "tests/acceptance/test_demo_vms.py": "vms",
    "tests/acceptance/test_isolation.py": "task-uids",
    "tests/test_workers.py": "probe",  # checks that these groups hold
    # one exploration per lab, kept for the module's tests that read it (explored()): apart,
    # a second worker explored every lab again (20 s)
    "tests/explore/test_explore.py": "explore",
    # one labq server and one Chromium for the pages; the sync Playwright API keeps an event
    # loop running in the worker while Chromium is up (asyncio.run fails beside it), so the
    # browser is the package's and ends with its last test
    "tests/ui/": "ui",
}


def one_worker_group(module: str) -> str | None:
    """The :data:`ONE_WORKER` group of a test module (by its path, or its directory's)."""
    return ONE_WORKER.get(module) or ONE_WORKER.get(module.rsplit("/", 1)[0] + "/")


# Modules whose timing is the point (lab agents' leases of seconds, restarts, partitions): marked
# ``alone``; scripts/test runs them after the rest, with no busy test beside them (tests of
# other modules are marked so one by one). They mostly wait (the machine was 94 % idle through
# that phase), so four run at a time, each test on whichever worker is free; tests/acceptance/
# test_readme.py, marked ``alone`` itself, keeps to one worker for its module's install.
ALONE = frozenset({"tests/acceptance/test_agents.py", "tests/acceptance/test_agent_bench.py"})
# Modules of long tests (Hypothesis properties of 150-300 examples, 10-30 s each on a quiet
# core): run first. A worker takes the next test whenever it is free, in collection order,
# and tests/unit comes last; one of these begun at the end keeps the other worker idle.
# Modules with a test marked ``slow`` go first too.
FIRST = frozenset(
    {
        "tests/unit/scheduler/test_core_properties.py",
        "tests/unit/scheduler/test_index.py",
        "tests/unit/scheduler/test_placement.py",
        "tests/unit/scheduler/test_backfill_properties.py",
        "tests/unit/scheduler/test_admission.py",
        "tests/unit/test_accounting.py",
    }
)


# first: pytest-xdist's own hook reads the xdist_group marks (and writes the groups into the
# tests' ids), so the marks must be there before it runs
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep each of :data:`ONE_WORKER`'s modules on one worker; mark :data:`ALONE`'s; put
    the modules of long tests (:data:`FIRST`, ``slow``) first, each module kept whole (the
    groups go first anyway: pytest-xdist hands out its work units largest first)."""
    first: set[str] = set()
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        group = one_worker_group(module)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(name=group))
        if module in ALONE:
            item.add_marker(pytest.mark.alone)
        if module in FIRST or item.get_closest_marker("slow") is not None:
            first.add(module)
    items.sort(key=lambda item: item.nodeid.split("::", 1)[0] not in first)  # stable
