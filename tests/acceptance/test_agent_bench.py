"""``bench/agents.py`` in its small form: a real server, agent processes, every claimed set ended.

The bench is run by hand at 50 agents × 20 sets on PostgreSQL (docs/performance.md,
Lab agents); here a few agents on SQLite show that its agents speak the protocol
to the end — each set they claim is reported completed and ended — and that
what it measures is there.
"""

from __future__ import annotations

import pytest
from bench.agents import Options, run


@pytest.mark.slow
def test_the_agents_bench_ends_every_set_it_claims() -> None:
    # the window stays open until 3 sets started in it have ended, however slow the machine:
    # the first round of 12 starts before the agents are up, so those are a later round's
    options = Options(agents=3, systems=4, seconds=4, warmup=2, db="sqlite", jobs=40, min_sets=3)
    summary = run(options)
    assert summary["failures"] == 0, summary["failure_sample"]
    assert summary["agent_processes_done"] == 3
    assert summary["claimed"] > 12  # more than one round of every system
    assert summary["unended"] == []
    assert summary["ended"] == summary["claimed"]
    assert summary["completed"] == summary["claimed"]
    assert summary["lost"] == 0
    assert summary["claimed_in_window"] > 0
    assert summary["reports_in_window"] >= summary["claimed_in_window"]
    assert summary["server_cpu_s"] > 0
    assert summary["health_cpu_ms_per_1k"] > 0
    assert 0 < summary["claim_ms_p50"] <= summary["claim_ms_p99"]
