"""What ``labq sim`` does, apart from reading its options."""

from __future__ import annotations

import sys

from rich.console import Console

from labq.domain.job import JobSpec
from labq.errors import InputError
from labq.sim.report import (
    compare_report,
    print_compare,
    print_run,
    print_whatif,
    run_report,
    whatif_report,
    write_json,
)
from labq.sim.runner import Run, simulate
from labq.sim.scenario import Scenario, load_scenario, with_config
from labq.sim.whatif import NAMES


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
    names = [name.strip() for name in policies]
    whatif = compare and set(names) <= set(NAMES) and len(names) > 1
    if whatif:
        runs = [_what_if(loaded, files, name, config, seed) for name in names]
    else:
        if config is not None:
            loaded = with_config(loaded, config)
        runs = [simulate(loaded, files, name, seed) for name in names]
    if plot_dir is not None:
        from labq.sim.plots import write_plots

        write_plots(runs, plot_dir)
    if as_json:
        body = compare_report(runs) if compare else run_report(runs[0])
        if whatif:
            body.update(whatif_report(runs))
        write_json(body, sys.stdout)
        return
    console = Console()
    if compare:
        print_compare(runs, console)
        if whatif:
            print_whatif(runs, console)
    else:
        print_run(runs[0], console)


def _what_if(
    loaded: Scenario, files: dict[str, JobSpec], name: str, config: str | None, seed: int
) -> Run:
    """labq's policy over the history: ``current`` as exported, ``new`` with ``--config``."""
    if name == "new":
        if config is None:
            raise InputError("--compare current,new needs --config FILE: the new settings")
        loaded = with_config(loaded, config)
    run = simulate(loaded, files, "labq", seed)
    return Run(name, run.world, run.scenario)


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
