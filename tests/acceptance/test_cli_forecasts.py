"""Forecasts through the command line: a job run once is forecast from that run the next time."""

from __future__ import annotations

import json
import re

import pytest

QUICK = """
whiteboard: quick {n}
recipe_sets:
  - max_time: 600
    recipes:
      - tasks:
          - {{name: quick, run: 'true', timeout: 60}}
"""
HOLDER = """
whiteboard: holds the system
recipe_sets:
  - max_time: 300
    recipes:
      - tasks:
          - {name: nap, run: sleep 120, timeout: 200}
"""
LINE = re.compile(
    r"set (\d+): starts ~(\S+ )?\d\d:\d\d UTC, ends ~(\S+ )?\d\d:\d\d UTC; "
    r"1 earlier run of this job, median \d+ s"
)


@pytest.fixture
def run(labq, live_server):
    def run(*args: str):
        env = {"LABQ_URL": live_server.url, "LABQ_TOKEN": live_server.token}
        result = labq(*args, env=env, timeout=60)
        assert result.returncode == 0, (args, result.stderr)
        assert "Traceback" not in result.stderr
        return result

    return run


def test_a_job_run_before_is_forecast_from_its_run(run, tmp_path):
    run("lab", "add", "lab1")
    run("system", "add", "a.lab1", "--lab", "lab1")
    for n, text in ((1, QUICK.format(n=1)), (2, QUICK.format(n=2))):
        (tmp_path / f"quick{n}.yaml").write_text(text)
    (tmp_path / "holder.yaml").write_text(HOLDER)
    done = json.loads(
        run("job", "submit", str(tmp_path / "quick1.yaml"), "--wait", "--json").stdout
    )
    assert done["state"] == "completed"

    holder = json.loads(run("job", "submit", str(tmp_path / "holder.yaml"), "--json").stdout)
    again = json.loads(run("job", "submit", str(tmp_path / "quick2.yaml"), "--json").stdout)
    queue = run("queue").stdout
    (waiting,) = json.loads(run("job", "show", str(again["id"]), "--json").stdout)["current_sets"]
    (line,) = [x for x in queue.splitlines() if LINE.search(x)]
    assert line.startswith(f"set {waiting}: starts ~")
    shown = run("job", "show", str(again["id"])).stdout
    assert LINE.search(shown), shown
    # the submission time as a person reads it, not the API's ISO text with microseconds
    assert re.search(r"^submitted_at: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$", shown, re.M), shown
    listed = json.loads(run("job", "list", "--whiteboard", "quick 2", "--json").stdout)
    (forecast,) = listed["jobs"][0]["forecasts"]
    assert forecast["prediction"]["basis"] == "source"
    assert forecast["prediction"]["runs"] == 1
    assert forecast["prediction"]["seconds"] < 600
    assert forecast["start_at"] is not None
    run("job", "cancel", str(again["id"]))  # before its holder ends, or it would run
    run("job", "cancel", str(holder["id"]))
