"""``labq sim`` as a user runs it: the command in a subprocess, and the charts."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from labq.sim.plots import GANTT_ROWS, write_plots
from labq.sim.runner import simulate
from labq.sim.scenario import load_scenario
from labq.sim.swf import load_swf

ROOT = Path(__file__).parents[2]
# written for the tests (tests/data/swf/README.md): 150 jobs, 256 nodes
SMALL_TRACE = ROOT / "tests" / "data" / "swf" / "small-256.swf"
COMPARED = ["labq", "easy", "teuthology-dispatcher", "teuthology-workers"]


def labq_script() -> list[str]:
    """The installed ``labq`` command, as a user runs it."""
    script = Path(sys.executable).parent / "labq"
    return [str(script)] if script.exists() else [shutil.which("labq") or "labq"]


def labq(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*labq_script(), *args], capture_output=True, text=True, cwd=cwd, timeout=120, check=False
    )


def test_swf_compare_json(tmp_path):
    done = labq(
        "sim", "--swf", str(SMALL_TRACE), "--limit", "120", "--compare", ",".join(COMPARED),
        "--json", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["policies"]
    assert [r["policy"] for r in rows] == COMPARED
    for row in rows:
        assert row["sets"] == 120
        assert row["started"] == 120
        assert row["stuck"] == 0
        assert 0 < row["utilization"] <= 1
    by_name = {r["policy"]: r for r in rows}
    # EASY backfills; a dispatcher with head-of-line blocking cannot
    assert by_name["easy"]["mean_wait"] < by_name["teuthology-dispatcher"]["mean_wait"]


def test_scenario_compare_with_plots(tmp_path):
    out = tmp_path / "plots"
    done = labq(
        "sim", str(ROOT / "examples/sim/abba-legacy.yaml"), "--compare", "labq,beaker-batch",
        "--plot", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "stuck sets" in done.stdout
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "gantt-beaker-batch.png",
        "gantt-labq.png",
        "utilisation.png",
        "wait_distribution.png",
    ]
    for path in out.iterdir():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_trace_is_one_line_on_stderr(tmp_path):
    bad = tmp_path / "bad.swf"
    bad.write_text("1 2 3\n")
    done = labq("sim", "--swf", str(bad), cwd=tmp_path)
    assert done.returncode != 0
    assert done.stderr.strip() == f"labq: {bad}:1: expected 18 fields, found 3"


def test_write_plots_returns_the_paths_and_caps_the_gantt(tmp_path):
    scenario = load_swf(SMALL_TRACE, nodes=None, limit=40, estimate="runtime")
    runs = [simulate(scenario, {}, "easy", 0), simulate(scenario, {}, "easy", 0)]
    paths = write_plots(runs, str(tmp_path / "new" / "dir"))
    assert [p.name for p in paths] == [
        "wait_distribution.png",
        "utilisation.png",
        "gantt-easy.png",
        "gantt-easy-2.png",  # the same policy twice does not overwrite
    ]
    assert all(p.exists() and p.stat().st_size > 10_000 for p in paths)
    assert len(runs[0].world.ledger.systems) > GANTT_ROWS  # so the cap was used


def test_every_example_scenario_runs_under_every_policy():
    from labq.sim.policy import registry

    for path in sorted((ROOT / "examples/sim").glob("*.yaml")):
        scenario, files = load_scenario(path)
        for policy in registry():
            simulate(scenario, files, policy, 0)


HISTORY = """
pools:
  - {name: fast, access: {qe: urgent}}
systems:
  - {fqdn: a.lab1, lab: lab1, pools: [fast]}
  - {fqdn: b.lab1, lab: lab1}
jobs:
  - id: job-1
    group: qe
    recipe_sets:
      - recipes:
          - {duration: 30, recorded: {start: 0, system: a.lab1}}
  - id: job-2
    group: qe
    submit_at: 1
    recipe_sets:
      - recipes:
          - {duration: 30, recorded: {start: 40, system: b.lab1}}
          - {duration: 30, recorded: {start: 40, system: a.lab1}}
"""


def test_compare_current_new_reports_fidelity_and_refuses_an_unknown_pool(tmp_path):
    (tmp_path / "lab.yaml").write_text(HISTORY)
    (tmp_path / "new.yaml").write_text("pools:\n  fast: {}\n")
    done = labq(
        "sim",
        "lab.yaml",
        "--config",
        "new.yaml",
        "--compare",
        "current,new",
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    # job-2 is one set of two recipes: it really started at 40 s, and a replay says 30 s
    assert report["fidelity"]["sets"] == 2
    assert report["fidelity"]["on_time"] == 1
    assert "job-2 set 0: recorded at 40.0 s" in report["fidelity"]["mismatches"][0]
    # a pool emptied of rules is open to everybody: both runs place the same
    assert set(report["groups"]["qe"]) == {"current", "new"}
    (tmp_path / "bad.yaml").write_text("pools:\n  nowhere: {}\n")
    bad = labq("sim", "lab.yaml", "--config", "bad.yaml", "--compare", "current,new", cwd=tmp_path)
    assert bad.returncode != 0
    assert bad.stderr.strip() == "labq: bad.yaml: pools: no pool 'nowhere' in the scenario"
    nothing = labq("sim", "lab.yaml", "--compare", "current,new", cwd=tmp_path)
    assert "needs --config FILE" in nothing.stderr
