"""labq against EASY on workloads whose declared limits are not the run times, and on the
shared traces with exact estimates: schedule quality, wall time and forecast accuracy.

    .venv/bin/python bench/sim_traces.py [--only limits|exact] [--seeds 1,2,3] [--days D]
                                         [--hosts H] [--limit J] [--no-lublin]
                                         [--policies labq,labq-predict,easy] [--config FILE]
                                         [TRACE ...]

**Declared limits** (the issue's comparison). The workloads: the test-lab model
(``labq.sim.testlab``) for each seed, and ``examples/traces/lublin_256.swf.gz`` with user
estimates from Tsafrir's model (``labq.sim.estimates``, seed 0). On each, in one run:

- ``labq``: the core with run-time predictions (backfill and reservations on predicted ends);
- ``easy-limits``: EASY on the declared limits (field 9);
- ``easy-exact``: EASY with every estimate := the job's run time (the ideal);
- ``labq-limits``: the core with predictions off (its forecasts are the declared-limit ones,
  as ``squeue --start`` makes them; its schedule should be EASY-on-limits' own).

Each prints mean and max wait, mean bounded slowdown (tau = 10 s), utilisation, stuck sets and
the wall time of the simulation alone (the forecasts noted for the accuracy figures left
out); then labq and easy-exact as ratios to easy-limits; then
the forecasts' absolute error against the actual start, made at submission and when the set
became the top holder: median and p90, over every set and over the sets that waited.

**Exact estimates** (``TRACE ...``, default ``../shared/traces/*.swf.gz``): each policy of
``--policies`` with declared times = run times, and labq's ratios to EASY's.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # where ../shared is: tests/realjobs

from tests.realjobs import ROOT, TRACES

from labq.sim import estimates, testlab
from labq.sim.forecasting import (
    SAMPLES,
    Accuracy,
    ForecastRecorder,
    PredictingRecorder,
    accuracy,
)
from labq.sim.metrics import Metrics, measure
from labq.sim.runner import simulate
from labq.sim.scenario import Scenario, with_config
from labq.sim.swf import load_swf, read_trace

LUBLIN = ROOT / "examples" / "traces" / "lublin_256.swf.gz"
HEADER = (
    f"{'workload':24} {'run':12} {'jobs':>6} {'mean wait h':>11} {'max wait h':>10}"
    f" {'mean bsld':>10} {'util':>7} {'stuck':>5} {'wall s':>7}"
)


@dataclass
class Result:
    """One policy's run over one workload."""

    metrics: Metrics
    wall: float
    accuracy: Accuracy | None = None


def main(argv: Sequence[str] | None = None) -> None:
    """Both comparisons, one line per run, then the ratios and the forecasts' errors."""
    args = _parser().parse_args(argv)
    if args.only != "exact":
        _limits(args)
    if args.only != "limits":
        _exact(args)


def _limits(args: argparse.Namespace) -> None:
    """The declared-limits part: each workload's four runs."""
    with tempfile.TemporaryDirectory() as scratch:
        workloads = list(_workloads(args, Path(scratch)))
        print("declared limits: labq (predictions on) against EASY on limits and on run times")
        print(HEADER)
        for name, scenario in workloads:
            _compare(name, scenario, args.config, args.samples)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("traces", nargs="*", help="traces for the exact-estimates comparison")
    parser.add_argument("--seeds", default="1,2,3", help="test-lab seeds ('' for none)")
    parser.add_argument("--days", type=int, default=testlab.TestLabModel.days)
    parser.add_argument("--hosts", type=int, default=testlab.TestLabModel.hosts)
    parser.add_argument("--limit", type=int, default=None, help="keep the first J jobs")
    parser.add_argument("--no-lublin", action="store_true", help="skip lublin with estimates")
    parser.add_argument("--only", choices=("limits", "exact"), default=None, help="one part")
    parser.add_argument("--policies", default="labq,labq-predict,easy", help="exact part's")
    parser.add_argument("--config", default=None, help="a scenario config laid over labq's")
    parser.add_argument("--samples", type=int, default=SAMPLES, help="submission forecasts")
    return parser


def _workloads(args: argparse.Namespace, scratch: Path) -> list[tuple[str, Scenario]]:
    out = []
    model = testlab.TestLabModel(days=args.days, hosts=args.hosts)
    for seed in [int(s) for s in args.seeds.split(",") if s.strip()]:
        path = scratch / f"testlab-{seed}.swf"
        testlab.write(path, model, seed)
        out.append((f"testlab seed {seed}", _load(path, args.limit)))
    if not args.no_lublin:
        path = scratch / "lublin-estimates.swf"
        estimates.write_estimated(LUBLIN, path, max_estimate=None, seed=0)
        out.append(("lublin_256 + estimates", _load(path, args.limit)))
    return out


def _load(path: Path, limit: int | None) -> Scenario:
    return load_swf(path, nodes=None, limit=limit, estimate="runtime")


def exact(scenario: Scenario) -> Scenario:
    """The same workload with every declared limit replaced by the run time."""
    jobs = []
    for job in scenario.jobs:
        sets = [
            rs.model_copy(update={"max_time": max(r.duration for r in rs.recipes)})
            for rs in job.recipe_sets or []
        ]
        jobs.append(job.model_copy(update={"recipe_sets": sets}))
    return scenario.model_copy(update={"jobs": jobs})


def _compare(name: str, scenario: Scenario, config: str | None, samples: int) -> None:
    """The four runs of one workload, their ratios and the forecasts' accuracy."""
    if config:
        scenario = with_config(scenario, config)
    runs: dict[str, tuple[Scenario, str, type[ForecastRecorder] | None]] = {
        "labq": (scenario, "labq-predict", PredictingRecorder),
        "easy-limits": (scenario, "easy", None),
        "easy-exact": (exact(scenario), "easy", None),
        "labq-limits": (scenario, "labq", ForecastRecorder),
    }
    found: dict[str, Result] = {}
    for run, (input_, policy, record) in runs.items():
        found[run] = result = _run(input_, policy, record, samples)
        print(_line(name, run, len(scenario.jobs), result), flush=True)
    base = found["easy-limits"]
    for run in ("labq", "easy-exact"):
        print(f"  {run} / easy-limits: {_ratios(found[run], base)}", flush=True)
    ours, theirs = found["labq"].accuracy, found["labq-limits"].accuracy
    if ours is not None and theirs is not None:
        for line in _accuracy_lines(ours, theirs):
            print(line, flush=True)


def _run(
    scenario: Scenario, policy: str, record: type[ForecastRecorder] | None, samples: int = SAMPLES
) -> Result:
    recorder = record.for_scenario(scenario, samples) if record is not None else None
    began = time.perf_counter()
    run = simulate(scenario, {}, policy, 0, policy=recorder)
    wall = time.perf_counter() - began - (recorder.spent if recorder is not None else 0.0)
    metrics = measure(run.world)
    found = accuracy(recorder, run.world) if recorder is not None else None
    return Result(metrics, wall, found)


def _line(name: str, run: str, jobs: int, result: Result) -> str:
    m = result.metrics
    return (
        f"{name[:24]:24} {run:12} {jobs:>6} {m.mean_wait / 3600:>11.2f} {m.max_wait / 3600:>10.1f}"
        f" {m.mean_bounded_slowdown:>10.2f} {m.utilization:>7.2%} {m.stuck:>5}"
        f" {result.wall:>7.1f}"
    )


def _ratios(ours: Result, theirs: Result) -> str:
    a, b = ours.metrics, theirs.metrics
    return (
        f"mean bsld {_ratio(a.mean_bounded_slowdown, b.mean_bounded_slowdown)},"
        f" mean wait {_ratio(a.mean_wait, b.mean_wait)},"
        f" max wait {_ratio(a.max_wait, b.max_wait)},"
        f" utilisation {a.utilization - b.utilization:+.2%} points,"
        f" wall time {_ratio(ours.wall, theirs.wall)}"
    )


def _accuracy_lines(ours: Accuracy, theirs: Accuracy) -> list[str]:
    lines = ["  forecast start, |error| in minutes (median / p90, sets): labq | declared limits"]
    for label, moment, subsets in (
        ("at submission", "submitted", ("all", "waited")),
        ("as top holder", "top", ("all",)),  # a top holder has always waited
    ):
        for subset in subsets:
            a, b = ours.errors(moment, subset), theirs.errors(moment, subset)
            lines.append(
                f"    {label:14} {subset:7} {a.text():>24} | {b.text():>24}"
                f"   labq/limits median {_ratio(a.median, b.median)}"
            )
    return lines


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}x" if b else "n/a"


def _exact(args: argparse.Namespace) -> None:
    """The shared traces with exact estimates: labq stays equal to EASY."""
    traces = args.traces or sorted(str(p) for p in TRACES.glob("*.swf.gz"))
    if not traces:
        print(f"exact estimates: no traces in {TRACES} (name the trace files)")
        return
    print("exact estimates (declared time = run time)")
    print(HEADER)
    for trace in traces:
        scenario = load_swf(trace, nodes=None, limit=args.limit, estimate="runtime")
        if args.config:
            scenario = with_config(scenario, args.config)
        found: dict[str, Result] = {}
        for policy in args.policies.split(","):
            found[policy] = result = _run(scenario, policy, None)
            name = trace.rsplit("/", 1)[-1]
            print(_line(name, policy, len(scenario.jobs), result), flush=True)
        for ours in ("labq", "labq-predict"):
            if ours in found and "easy" in found:
                print(f"  {ours} / easy: {_ratios(found[ours], found['easy'])}", flush=True)


def trace_jobs(path: Path) -> int:
    """How many job lines a trace has (the tests' check of what was written)."""
    return len(read_trace(path)[1])


if __name__ == "__main__":
    main()
