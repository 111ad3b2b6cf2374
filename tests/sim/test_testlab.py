"""The test-lab workload model, Tsafrir's estimate model, and the bench that runs them."""

from __future__ import annotations

import collections
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labq.errors import InputError
from labq.sim import estimates, testlab
from labq.sim.swf import load_swf, read_trace

SMALL = testlab.TestLabModel(hosts=16, days=2, kinds=30, users=8, groups=3)


def test_same_seed_same_trace_other_seed_other_trace() -> None:
    first = testlab.swf_text(SMALL, 7)
    assert testlab.swf_text(SMALL, 7) == first
    assert testlab.swf_text(SMALL, 8) != first


def test_fields_are_those_of_a_test_lab(tmp_path: Path) -> None:
    path = tmp_path / "lab.swf"
    written = testlab.write(path, SMALL, 3)
    header, jobs = read_trace(path)
    assert header == SMALL.hosts
    assert len(jobs) == written > 50
    assert [j.number for j in jobs] == list(range(1, len(jobs) + 1))
    assert [j.submit for j in jobs] == sorted(j.submit for j in jobs)
    for job in jobs:
        assert 1 <= job.processors <= SMALL.hosts
        assert 0 < job.runtime <= job.requested_time  # a watchdog stops a run at its limit
        assert job.requested_time in (*testlab.POPULAR_LIMITS, SMALL.default_limit)
        assert 1 <= job.user <= SMALL.users
        assert 1 <= job.group <= SMALL.groups
    kinds = [int(line.split()[13]) for line in path.read_text().splitlines() if line[0] != ";"]
    assert min(kinds) >= 1
    assert max(kinds) <= SMALL.kinds
    # a kind is one user's, one width and one declared limit, and runs for about as long
    by_kind = collections.defaultdict(list)
    for job, kind in zip(jobs, kinds, strict=True):
        by_kind[kind].append(job)
    for runs in by_kind.values():
        assert len({(j.user, j.group, j.processors, j.requested_time) for j in runs}) == 1
    widths = collections.Counter(j.processors for j in jobs)
    assert widths[1] + widths[2] > len(jobs) / 2  # mostly one or two hosts


def test_the_nightly_burst_comes_at_night() -> None:
    model = testlab.TestLabModel(hosts=16, days=1, kinds=40, nightly_share=1.0)
    jobs = testlab.generate(model, 1)
    assert all(
        model.nightly_at <= j.submit <= model.nightly_at + model.nightly_spread for j in jobs
    )
    assert len(jobs) == 40 * model.nightly_runs


def test_a_trace_is_a_scenario(tmp_path: Path) -> None:
    path = tmp_path / "lab.swf"
    testlab.write(path, SMALL, 5)
    scenario = load_swf(path, nodes=None, limit=None, estimate="runtime")
    assert len(scenario.all_systems()) == SMALL.hosts
    assert all(rs.max_time for job in scenario.jobs for rs in job.recipe_sets or [])


def test_a_bad_parameter_is_named() -> None:
    with pytest.raises(InputError, match="hosts must be positive"):
        testlab.generate(testlab.TestLabModel(hosts=0), 1)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=40 * 3600), min_size=1, max_size=400),
    st.integers(min_value=0, max_value=2**16),
)
def test_estimates_never_below_the_run_time(runtimes: list[int], seed: int) -> None:
    drawn = estimates.assign([float(r) for r in runtimes], None, seed)
    assert len(drawn) == len(runtimes)
    assert all(e >= r for e, r in zip(drawn, runtimes, strict=True))
    assert drawn == estimates.assign([float(r) for r in runtimes], None, seed)


def test_estimates_come_from_a_few_popular_values() -> None:
    rng = random.Random(1)
    runtimes = [rng.lognormvariate(7, 1.5) for _ in range(5000)]
    runtimes = [min(r, 30 * 3600) for r in runtimes]
    drawn = estimates.assign(runtimes, 36 * 3600, 0)
    counts = collections.Counter(drawn)
    top = counts.most_common(20)
    assert top[0][0] == 36 * 3600  # the maximal estimate is the most popular
    assert 0.85 < sum(n for _, n in top) / len(drawn) < 0.93  # the paper's 89 %
    assert len(counts) <= estimates._bin_count(len(drawn))


def test_a_maximum_below_the_longest_job_is_refused() -> None:
    with pytest.raises(InputError, match="longer than the maximal estimate"):
        estimates.assign([2 * 3600.0], 3600, 0)


def test_a_trace_gets_estimates_in_field_9(tmp_path: Path) -> None:
    source = tmp_path / "in.swf"
    testlab.write(source, SMALL, 2)
    target = tmp_path / "out.swf"
    count = estimates.write_estimated(source, target, max_estimate=None, seed=4)
    _, before = read_trace(source)
    _, after = read_trace(target)
    assert count == len(before) == len(after)
    assert [j.runtime for j in after] == [j.runtime for j in before]
    assert all(j.requested_time >= j.runtime for j in after)
    assert target.read_text() != source.read_text()


def test_the_bench_runs_in_short_form(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from bench.sim_traces import main

    tiny = tmp_path / "tiny.swf"
    testlab.write(tiny, SMALL, 9)
    main(["--seeds", "1", "--days", "1", "--hosts", "8", "--limit", "40", str(tiny)])
    out = capsys.readouterr().out
    for run in ("labq", "easy-limits", "easy-exact", "labq-limits"):
        assert f" {run} " in out
    assert "testlab seed 1" in out
    assert "lublin_256 + estimates" in out
    assert "easy-exact / easy-limits: mean bsld" in out
    assert "exact estimates" in out
    assert "labq / easy:" in out


def test_forecasts_are_recorded_at_submission_and_as_top_holder(tmp_path: Path) -> None:
    from labq.sim.forecasting import PredictingRecorder, accuracy
    from labq.sim.runner import simulate

    path = tmp_path / "lab.swf"
    testlab.write(path, testlab.TestLabModel(hosts=8, days=1, kinds=20), 4)
    scenario = load_swf(path, nodes=None, limit=120, estimate="runtime")
    recorder = PredictingRecorder.for_scenario(scenario)
    run = simulate(scenario, {}, "labq-predict", 0, policy=recorder)
    found = accuracy(recorder, run.world)
    assert len(found.submitted) == len(scenario.jobs)  # fewer than the sample: every set
    assert found.top  # wide sets waited as top holders
    assert set(found.top) <= set(found.submitted)
    for moment in ("submitted", "top"):
        errors = found.errors(moment, "all")
        assert errors.values
        assert 0 <= errors.median <= errors.p90
