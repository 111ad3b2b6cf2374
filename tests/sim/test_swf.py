"""Reading Standard Workload Format traces."""

from __future__ import annotations

import gzip

import pytest

from labq.errors import InputError
from labq.sim.runner import simulate
from labq.sim.swf import load_swf, parse_estimate
from tests.realjobs import TRACES, require

HEADER = "; Version: 2.2\n; MaxNodes: 8\n; MaxProcs: 16\n;\n"


def line(number, submit, runtime, procs, *, requested=-1, user=-1, group=-1, req_time=-1):
    fields = [number, submit, -1, runtime, procs, -1, -1, requested, req_time, -1, 1, user, group]
    return " ".join(str(f) for f in [*fields, -1, -1, -1, -1, -1]) + "\n"


@pytest.fixture
def trace(tmp_path):
    text = HEADER + "".join(
        [
            line(1, 0, 100, 2, user=3, group=1),
            line(2, 5, 50, -1, requested=4, user=3),  # allocated unknown: requested counts
            line(3, 6, 0, 2),  # no run time: skipped
            line(4, 7, 10, 0),  # no processors: skipped
            line(5, 8, 10, 9),  # wider than the 8 nodes: skipped
            line(6, 9, 30, 1, req_time=600),  # the user's own estimate
            line(7, 10, 30, 1, req_time=20),  # an estimate below the run time
        ]
    )
    path = tmp_path / "small.swf"
    path.write_text(text)
    return path


def test_jobs_become_sets_of_identical_recipes(trace):
    scenario = load_swf(trace, nodes=None, limit=None, estimate="runtime")
    assert [s.fqdn for s in scenario.all_systems()] == [f"node-{i}" for i in range(1, 9)]
    assert [j.id for j in scenario.jobs] == ["j1", "j2", "j6", "j7"]
    first = scenario.jobs[0]
    assert first.submit_at == 0
    assert first.group == "g1"
    (recipe_set,) = first.recipe_sets or []
    assert len(recipe_set.recipes) == 2
    assert {r.duration for r in recipe_set.recipes} == {100}
    assert recipe_set.recipes[0].host == {}
    assert recipe_set.max_time == 100


def test_group_falls_back_to_user_then_everybody(trace, tmp_path):
    scenario = load_swf(trace, nodes=None, limit=None, estimate="runtime")
    assert [j.group for j in scenario.jobs] == ["g1", "u3", None, None]


def test_estimates(trace):
    def max_times(estimate):
        scenario = load_swf(trace, nodes=None, limit=None, estimate=estimate)
        return [j.recipe_sets[0].max_time for j in scenario.jobs]

    assert max_times("runtime") == [100, 50, 600, 30]  # the trace's own estimate wins
    assert max_times("x2") == [200, 100, 600, 30]  # never below the run time
    assert max_times("x1.5") == [150, 75, 600, 30]


def test_nodes_and_limit(trace):
    scenario = load_swf(trace, nodes=4, limit=1, estimate="runtime")
    assert len(scenario.all_systems()) == 4
    assert [j.id for j in scenario.jobs] == ["j1"]
    wide = load_swf(trace, nodes=16, limit=None, estimate="runtime")
    assert "j5" in [j.id for j in wide.jobs]


def test_max_procs_when_no_max_nodes(tmp_path):
    path = tmp_path / "procs.swf"
    path.write_text("; MaxProcs: 3\n" + line(1, 0, 10, 3))
    assert len(load_swf(path, nodes=None, limit=None, estimate="runtime").all_systems()) == 3


def test_gzip_and_a_simulation(trace, tmp_path):
    packed = tmp_path / "small.swf.gz"
    packed.write_bytes(gzip.compress(trace.read_bytes()))
    scenario = load_swf(packed, nodes=None, limit=None, estimate="runtime")
    result = simulate(scenario, {}, "labq", 0)
    assert all(s.finished_at is not None for s in result.world.sets.values())
    assert result.world.sets[result.world.jobs["j2"][0]].started_at == 5.0


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("1 2 3\n", "expected 18 fields, found 3"),
        (line(1, 0, 10, 1).replace("10", "ten", 1), "field 4 is not a number: 'ten'"),
        (line(1, -5, 10, 1), "submit time (field 2) must not be negative"),
        (line(1, 0, 10, 1).replace("10", "nan", 1), "fields must be finite numbers"),
    ],
)
def test_bad_lines_name_the_file_and_line(tmp_path, text, problem):
    path = tmp_path / "bad.swf"
    path.write_text(HEADER + line(1, 0, 10, 1) + text)
    with pytest.raises(InputError) as caught:
        load_swf(path, nodes=None, limit=None, estimate="runtime")
    assert str(caught.value) == f"{path}:6: {problem}"


def test_unreadable_files(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_swf(tmp_path / "missing.swf", nodes=None, limit=None, estimate="runtime")
    broken = tmp_path / "broken.swf.gz"
    broken.write_bytes(b"not gzip at all")
    with pytest.raises(InputError, match=r"broken\.swf\.gz: cannot be read as an SWF trace"):
        load_swf(broken, nodes=None, limit=None, estimate="runtime")
    binary = tmp_path / "binary.swf"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError, match="cannot be read"):
        load_swf(binary, nodes=None, limit=None, estimate="runtime")


@pytest.mark.parametrize("estimate", ["x0.5", "x", "twice", "x-2", "xinf", "x1e3"])
def test_bad_estimates(estimate):
    with pytest.raises(InputError, match="--estimate"):
        parse_estimate(estimate)


def test_good_estimates():
    assert parse_estimate("runtime") is None
    assert parse_estimate("x3") == 3.0
    assert parse_estimate(" X1.25 ") == 1.25


@pytest.mark.parametrize(
    ("name", "nodes"), [("lublin_256.swf.gz", 256), ("NASA-iPSC-1993-3.1-cln.swf.gz", 128)]
)
def test_shared_traces_first_200_jobs(name, nodes):
    path = require(TRACES / name)  # the real traces: skipped where missing, failed under CI
    scenario = load_swf(path, nodes=None, limit=200, estimate="x2")
    assert len(scenario.all_systems()) == nodes
    assert len(scenario.jobs) == 200
    submits = [j.submit_at for j in scenario.jobs]
    assert submits == sorted(submits)
    for policy in ("labq", "easy"):
        result = simulate(scenario, {}, policy, 0)
        started = [s for s in result.world.sets.values() if s.started_at is not None]
        assert len(started) == 200, policy
