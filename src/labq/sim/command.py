"""What ``labq sim`` does, apart from reading its options."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.progress import Progress

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
from labq.terminal import output, progress, shows_progress, written


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
    """Load the input, run each policy, print and plot (a progress bar on a terminal)."""
    names = [name.strip() for name in policies]
    whatif = compare and set(names) <= set(NAMES) and len(names) > 1
    with progress(shows_progress(as_json)) as bar:
        reading = bar.add_task(f"reading {swf or scenario}", total=None)
        loaded, files = _load(scenario, swf, nodes, limit, estimate)
        bar.remove_task(reading)
        if whatif:
            runs = [_what_if(loaded, files, name, config, seed, bar) for name in names]
        else:
            if config is not None:
                loaded = with_config(loaded, config)
            runs = [_simulate(loaded, files, name, seed, bar) for name in names]
        plots = _plot(runs, plot_dir, bar) if plot_dir is not None else []
    if plot_dir is not None:
        written("plots", plot_dir, plots)
    if as_json:
        body = compare_report(runs) if compare else run_report(runs[0])
        if whatif:
            body.update(whatif_report(runs))
        write_json(body, sys.stdout)
        return
    console = output()
    if compare:
        print_compare(runs, console)
        if whatif:
            print_whatif(runs, console)
    else:
        print_run(runs[0], console)


def _simulate(
    loaded: Scenario,
    files: dict[str, JobSpec],
    name: str,
    seed: int,
    bar: Progress,
    policy: str | None = None,
) -> Run:
    """One run, its set attempts ended counted on the bar (``policy`` if it is not ``name``)."""
    task = bar.add_task(f"simulating {name}", total=None)

    def step(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    run = simulate(loaded, files, policy or name, seed, progress=step)
    known = len(run.world.sets)  # stuck sets never end: the run did
    bar.update(task, completed=known, total=known)
    return Run(name, run.world, run.scenario)


def _plot(runs: list[Run], directory: str, bar: Progress) -> list[Path]:
    from labq.sim.plots import write_plots

    task = bar.add_task("plotting", total=len(runs) + 2)  # two charts, then one per run
    return write_plots(runs, directory, done=lambda: bar.advance(task))


def _what_if(
    loaded: Scenario,
    files: dict[str, JobSpec],
    name: str,
    config: str | None,
    seed: int,
    bar: Progress,
) -> Run:
    """labq's policy over the history: ``current`` as exported, ``new`` with ``--config``."""
    if name == "new":
        if config is None:
            raise InputError("--compare current,new needs --config FILE: the new settings")
        loaded = with_config(loaded, config)
    return _simulate(loaded, files, name, seed, bar, policy="labq")


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
