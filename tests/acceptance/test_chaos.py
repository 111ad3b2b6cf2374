"""Short forms of the fault-injection runs (full ones: ``bench/reliability.py``).

A server killed at random under a stream of one- and two-host jobs, on SQLite
and PostgreSQL; two servers on PostgreSQL whose leader's lock connection is cut
again and again. Every job must end, no set may run twice, no system may serve
two sets at once, nothing may be left running.
"""

from __future__ import annotations

import pytest

from tests.acceptance import chaos

pytestmark = pytest.mark.slow


@pytest.fixture
def lab(database_url, tmp_path):
    servers = 2 if database_url.startswith("postgresql") else 1
    made = chaos.Lab(database_url, tmp_path / "chaos", servers=servers)
    made.start()
    yield made
    made.stop()


def test_killing_the_server_at_random_loses_nothing_and_runs_nothing_twice(lab):
    figures = chaos.crash(lab, kills=5, jobs=12)
    print(chaos.report("crash", figures))
    assert figures.clean(), chaos.report("crash", figures)
    assert figures.jobs >= 12


def test_cutting_the_leaders_lock_connection_never_splits_the_brain(lab, database_url):
    if not database_url.startswith("postgresql"):
        pytest.skip("one server per SQLite file: there is no lock connection to cut")
    figures = chaos.split_brain(lab, cuts=4, jobs=12)
    print(chaos.report("split brain", figures))
    assert figures.clean(), chaos.report("split brain", figures)
    assert figures.faults == 4
