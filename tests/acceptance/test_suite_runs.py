"""``labq suite`` and ``labq run`` against a real server: a suite of teuthology fragments runs
end to end on the local backend as one run; runs are listed, shown, cancelled.

The fragments are written here, as teuthology's own noop suite has them; real ones from
``../shared`` are expanded in ``tests/unit/test_suite.py``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.acceptance.test_cli_api import PASSING, SLOW, data, one_line_refusal


@pytest.fixture
def as_user(labq, live_server):
    def run(*args: str, ok: bool = True):
        env = {"LABQ_URL": live_server.url, "LABQ_TOKEN": live_server.token}
        result = labq(*args, env=env, timeout=60)
        if ok:
            assert result.returncode == 0, (args, result.stderr)
        return result

    return run


# teuthology's noop job (its suites/noop), as a base facet
NOOP = """\
roles:
- - mon.a
  - osd.0
tasks:
- exec:
    mon.a:
      - echo "Well done !"
"""
# overrides and nothing else: a fragment that is no whole job
OVERRIDES_ONLY = """\
overrides:
  cephadm:
    osd_method: raw
"""

NAP = """
recipe_sets:
  - recipes:
      - tasks:
          - {name: nap, run: sleep 30, timeout: 60}
"""


def noop_suite(root: Path) -> Path:
    """suites/noop/{% base/ extra$/ checks+/}: teuthology's own noop job as the base facet."""
    suite = root / "suites" / "noop"
    for sub in ("base", "extra$", "checks"):
        (suite / sub).mkdir(parents=True)
    (suite / "%").touch()
    (suite / "base" / "noop.yaml").write_text(NOOP)
    (suite / "base" / "noop-osd.yaml").write_text(
        "roles:\n- [mon.a, osd.0]\ntasks:\n- exec:\n    osd.0: [echo osd]\n"
    )
    for name in ("one", "two", "three"):
        (suite / "extra$" / f"{name}.yaml").write_text(
            f"tasks:\n- exec:\n    mon.a: [echo {name}]\n"
        )
    (suite / "checks" / "+").touch()
    (suite / "checks" / "a.yaml").write_text("tasks:\n- exec:\n    mon.a: [test -n yes]\n")
    (suite / "checks" / "b.yaml").write_text("overrides:\n  note: b\n")
    return suite


def wait_for_run(as_user, name: str, timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = data(as_user("run", "show", name, "--json"))
        if shown["counts"]["queued"] == shown["counts"]["running"] == 0:
            return shown
        time.sleep(0.5)
    raise AssertionError(f"run {name} did not finish: {shown['counts']}")


def test_a_suite_runs_end_to_end_as_one_run(as_user, tmp_path):
    as_user("lab", "add", "lab1")
    for n in (1, 2):
        as_user("system", "add", f"s{n}.lab1", "--lab", "lab1")
    suite = noop_suite(tmp_path)
    dry = as_user("suite", str(suite), "--dry-run", "--seed", "7").stdout.splitlines()
    assert dry[-1] == "2 job(s), seed 7 (dry run: nothing submitted)"
    assert all(line.startswith("noop/{base/noop") for line in dry[:-1])
    assert all("checks/{a.yaml b.yaml}" in line for line in dry[:-1])
    assert data(as_user("run", "list", "--json"))["runs"] == []  # a dry run submits nothing
    again = as_user("suite", str(suite), "--dry-run", "--seed", "7").stdout.splitlines()
    assert again == dry  # the seed repeats the '$' picks
    out = as_user("suite", str(suite), "--seed", "7", "--run", "noop-1", "--priority", "50")
    assert out.stdout.strip() == "submitted run noop-1: 2 job(s), seed 7"
    shown = wait_for_run(as_user, "noop-1")
    assert shown["counts"] == {"queued": 0, "running": 0, "pass": 2, "fail": 0, "dead": 0}
    assert sorted(j["whiteboard"] for j in shown["jobs"]) == sorted(dry[:-1])
    assert shown["metadata"]["seed"] == 7
    job = data(as_user("job", "show", str(shown["jobs"][0]["id"]), "--json"))
    assert job["sets"][0]["priority"] == "high"  # teuthology priority 50
    listed = as_user("run", "list").stdout
    assert "noop-1" in listed
    only = as_user("suite", str(suite), "--dry-run", "--filter", "noop-osd").stdout
    assert only.splitlines()[-1].startswith("1 job(s)")


def test_job_submit_run_and_cancelling_a_run(as_user, tmp_path):
    as_user("lab", "add", "lab1")
    as_user("system", "add", "s1.lab1", "--lab", "lab1")
    (tmp_path / "slow.yaml").write_text(NAP)
    (tmp_path / "pass.yaml").write_text(PASSING)
    made = data(
        as_user(
            "job",
            "submit",
            "--run",
            "pair",
            str(tmp_path / "slow.yaml"),
            str(tmp_path / "slow.yaml"),
            "--json",
        )
    )
    assert len(made["jobs"]) == 2
    text = as_user("run", "show", "pair").stdout
    assert "queued:" in text
    done = data(as_user("run", "cancel", "pair", "--reason", "not today", "--json"))
    assert sorted(int(k) for k in done["cancelled"]) == sorted(made["jobs"])
    shown = wait_for_run(as_user, "pair")
    assert shown["counts"]["dead"] == 2
    several = as_user(
        "job", "submit", str(tmp_path / "pass.yaml"), str(tmp_path / "pass.yaml"), ok=False
    )
    one_line_refusal(several, "--run")
    taken = as_user("job", "submit", "--run", "pair", str(tmp_path / "pass.yaml"), ok=False)
    one_line_refusal(taken, "already a run named 'pair'")
    (tmp_path / "nowhere.yaml").write_text(SLOW)  # no system has that much memory
    nowhere = [str(tmp_path / "pass.yaml"), str(tmp_path / "nowhere.yaml")]
    refused = as_user("job", "submit", "--run", "other", *nowhere, ok=False)
    one_line_refusal(
        refused,
        "nowhere.yaml:6: recipe_sets[0].recipes[0].host.memory_mb: can never run: "
        "memory_mb: no system records this property",
    )
    assert "other" not in as_user("run", "list").stdout


def test_a_suite_job_that_is_not_a_job_is_refused_in_one_line(as_user, tmp_path):
    suite = tmp_path / "suites" / "broken"
    (suite / "over").mkdir(parents=True)
    (suite / "%").touch()
    (suite / "over" / "node.yaml").write_text(OVERRIDES_ONLY)
    refused = as_user("suite", str(suite), ok=False)
    one_line_refusal(refused, "broken/{over/node.yaml}", "not a whole job")
    assert json.loads(as_user("run", "list", "--json").stdout)["total"] == 0
