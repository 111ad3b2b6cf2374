"""What ``labq sim`` does, apart from reading its options."""

from __future__ import annotations

import sys

from rich.console import Console

from labq.domain.job import JobSpec
from labq.errors import InputError
from labq.sim.report import compare_report, print_compare, print_run, run_report, write_json
from labq.sim.runner import Run, simulate
from labq.sim.scenario import Scenario, load_scenario, with_config


def run_sim(
    *,
    scenario: str | None,
    policies: list[str],
    compare: bool,
    as_json: bool,
    plot_dir: str | None,
    seed: int,
    swf: str | None,
    nodes: int | None,
    limit: int | None,
    estimate: str,
    config: str | None = None,
) -> None:
    """Load the input, run each policy, print and plot."""
    loaded, files = _load(scenario, swf, nodes, limit, estimate)
    if config is not None:
        loaded = with_config(loaded, config)
    runs: list[Run] = [simulate(loaded, files, name.strip(), seed) for name in policies]
    if plot_dir is not None:
        from labq.sim.plots import write_plots

        write_plots(runs, plot_dir)
    if as_json:
        write_json(compare_report(runs) if compare else run_report(runs[0]), sys.stdout)
        return
    console = Console()
    if compare:
        print_compare(runs, console)
    else:
        print_run(runs[0], console)


def _load(
    scenario: str | None, swf: str | None, nodes: int | None, limit: int | None, estimate: str
) -> tuple[Scenario, dict[str, JobSpec]]:
    if (scenario is None) == (swf is None):
        raise InputError("give either a SCENARIO file or --swf TRACE")
    if swf is not None:
        from labq.sim.swf import load_swf

        return load_swf(swf, nodes=nodes, limit=limit, estimate=estimate), {}
    assert scenario is not None
    return load_scenario(scenario)
