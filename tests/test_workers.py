"""The suite's tests that must share a worker do: under ``--dist loadgroup`` (scripts/test)
each test of a module of ``ONE_WORKER`` or with an ``xdist_group`` mark of its own carries its
group in its id, which is how pytest-xdist keeps a group on one worker. Neither a conftest hook
that adds the marks after xdist read them nor a pytest whose ids xdist can no longer write
(9.2) may leave them apart unnoticed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ALONE, ONE_WORKER, one_worker_group


def expected_group(item: pytest.Item) -> str | None:
    module = item.nodeid.split("::", 1)[0]
    group = one_worker_group(module)
    if group is not None:
        return group
    names = sorted(
        {str(m.args[0] if m.args else m.kwargs["name"]) for m in item.iter_markers("xdist_group")}
    )
    return "_".join(names) or None


def test_every_grouped_test_carries_its_group(request: pytest.FixtureRequest) -> None:
    if not request.config.getvalue("loadgroup"):
        pytest.skip("not run under --dist loadgroup (scripts/test runs it so)")
    # this module is one of ONE_WORKER's: run alone, it checks itself; in the suite, all
    assert request.node.nodeid.endswith(f"@{ONE_WORKER['tests/test_workers.py']}")
    items = request.session.items
    grouped = {item.nodeid: expected_group(item) for item in items if expected_group(item)}
    apart = [nodeid for nodeid, group in grouped.items() if not nodeid.endswith(f"@{group}")]
    assert apart == [], f"{len(apart)} grouped tests run wherever a worker is free: {apart[:3]}"


def test_every_alone_test_is_where_scripts_test_looks_for_them() -> None:
    """scripts/test collects the ``alone`` phase from tests/acceptance only."""
    tests = Path(__file__).parent
    marked = {
        path.relative_to(tests.parent).as_posix()
        for path in tests.rglob("test_*.py")
        if path != Path(__file__) and "mark.alone" in path.read_text()
    }
    assert marked, "no test is marked alone: the search is wrong"
    outside = sorted(m for m in marked | ALONE if not m.startswith("tests/acceptance/"))
    assert outside == [], f"alone tests scripts/test would not run: {outside}"
