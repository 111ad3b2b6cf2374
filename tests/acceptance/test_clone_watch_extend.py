"""Issue 14 items 1-3 through a real ``labq server``: clone, watch and extend.

A clone of a finished job runs again and links back; ``watch`` exits 1 only once
the last retry has failed; ``extend`` keeps a set alive past its original max_time.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.acceptance.conftest import cli, running_server, wait_for

PASSING = """# a comment the source keeps
whiteboard: passes
recipe_sets:
  - recipes:
      - tasks:
          - {name: ok, run: "echo hello"}
"""
# every attempt overruns its task's timeout and aborts; one retry is allowed
ALWAYS_ABORTS = """
whiteboard: never passes
recipe_sets:
  - max_retries: 1
    recipes:
      - tasks:
          - {name: stuck, run: "sleep 30", timeout: 1}
"""
# runs 8 s under a max_time of 5 s
OVERRUNS = """
whiteboard: {name}
recipe_sets:
  - max_time: 5
    recipes:
      - tasks:
          - {{name: long, run: "sleep 8"}}
"""


def add_lab(env: dict[str, str], *fqdns: str) -> None:
    assert cli(env, "lab", "add", "lab1").returncode == 0
    for fqdn in fqdns:
        assert cli(env, "system", "add", fqdn, "--lab", "lab1").returncode == 0


def test_a_clone_of_a_finished_job_runs_again_and_links_back(server, tmp_path):
    client, _, env = server
    add_lab(env, "a.lab1")
    job_file = tmp_path / "passing.yaml"
    job_file.write_text(PASSING)
    assert cli(env, "job", "submit", str(job_file), "--wait").returncode == 0
    source = cli(env, "job", "source", "1")
    assert (source.returncode, source.stdout) == (0, PASSING)

    cloned = cli(env, "job", "clone", "1", "--whiteboard", "again", "--wait")
    assert cloned.returncode == 0, cloned.stderr
    assert cloned.stdout.splitlines()[0] == "submitted job 2, a clone of job 1"
    assert cloned.stdout.splitlines()[-1] == "job 2 completed: pass"
    shown = json.loads(cli(env, "job", "show", "2", "--json").stdout)
    assert (shown["cloned_from"], shown["whiteboard"], shown["state"]) == (1, "again", "completed")
    assert client.get("/jobs/1").json()["cloned_from"] is None
    assert "cloned_from: 1" in cli(env, "job", "show", "2").stdout.splitlines()

    as_json = cli(env, "job", "clone", "1", "--json")
    assert json.loads(as_json.stdout)["cloned_from"] == 1
    missing = cli(env, "job", "clone", "99")
    assert missing.returncode != 0
    assert missing.stderr.strip().splitlines() == ["labq: no job 99"]
    bad = cli(env, "job", "clone", "1", "--priority", "highest")
    assert bad.returncode != 0
    assert len(bad.stderr.strip().splitlines()) == 1
    assert "--priority" in bad.stderr


def test_watch_exits_1_only_after_the_last_retry_fails(server, tmp_path):
    client, _, env = server
    add_lab(env, "a.lab1", "b.lab1")
    job_file = tmp_path / "aborts.yaml"
    job_file.write_text(ALWAYS_ABORTS)
    assert cli(env, "job", "submit", str(job_file)).returncode == 0
    passing = tmp_path / "passing.yaml"
    passing.write_text(PASSING)
    assert cli(env, "job", "submit", str(passing)).returncode == 0

    watched = cli(env, "job", "watch", "1")
    assert watched.returncode == 1, watched.stdout + watched.stderr
    # when watch returned, the retry had run and failed too: nothing more follows
    results = client.get("/jobs/1/results").json()
    assert [s["attempt"] for s in results["sets"]] == [1, 2]
    assert [s["state"] for s in results["sets"]] == ["aborted", "aborted"]
    assert watched.stdout.splitlines()[-1] == "job 1 aborted: fail"

    wait_for(client, 2)
    assert cli(env, "job", "watch", "2").returncode == 0
    both = cli(env, "job", "watch", "2", "1", "2", "--json")
    assert both.returncode == 1
    assert [j["id"] for j in json.loads(both.stdout)] == [2, 1]
    assert cli(env, "job", "watch", "99").returncode != 0


@pytest.fixture
def quick_server(tmp_path):
    """A server whose supervisors heart-beat every 0.2 s."""
    config = tmp_path / "labq.yaml"
    config.write_text("heartbeat_every: 0.2\n")
    with running_server(
        f"sqlite:///{tmp_path / 'server.db'}",
        data=tmp_path / "data",
        home=tmp_path,
        log=tmp_path / "server.log",
        config=config,
    ) as running:
        env = {**running.env, "LABQ_URL": running.url, "LABQ_TOKEN": running.token}
        with httpx.Client(
            base_url=f"{running.url}/api/v1",
            headers={"Authorization": f"Bearer {running.token}"},
            timeout=10,
        ) as client:
            yield client, env


def test_extend_keeps_a_set_alive_past_its_original_max_time(quick_server, tmp_path):
    client, env = quick_server
    add_lab(env, "a.lab1", "b.lab1")
    for name in ("extended", "left alone"):
        job_file = tmp_path / f"{name.replace(' ', '-')}.yaml"
        job_file.write_text(OVERRUNS.format(name=name))
        assert cli(env, "job", "submit", str(job_file)).returncode == 0
    deadline = time.monotonic() + 20
    while client.get("/jobs/1").json()["state"] != "running":
        assert time.monotonic() < deadline, "job 1 never ran"
        time.sleep(0.1)
    extended = cli(env, "job", "extend", "1", "--by", "10s")
    assert extended.returncode == 0, extended.stderr
    assert extended.stdout.strip() == "set 1: max_time now 15 s (10 s extended in all)"

    kept = wait_for(client, 1, timeout=30)
    cut = wait_for(client, 2, timeout=30)
    assert (kept["state"], kept["result"]) == ("completed", "pass")
    assert cut["state"] == "aborted"  # the same job, not extended, stops at 5 s
    assert cut["sets"][0]["recipes"][0]["tasks"][0]["message"] == "killed: exceeded max_time of 5 s"

    over = cli(env, "job", "extend", "2", "--by", "1m")  # it has ended
    assert over.returncode != 0
    assert over.stderr.strip() == "labq: job 2 has ended: nothing to extend"
    bad = cli(env, "job", "extend", "1", "--by", "soon")
    assert bad.returncode != 0
    assert "'soon' is not a duration" in bad.stderr


def test_extend_is_refused_to_someone_else(quick_server, tmp_path):
    client, env = quick_server
    add_lab(env, "a.lab1")
    assert cli(env, "user", "add", "bob").returncode == 0
    made = cli(env, "token", "create", "bob-token", "--user", "bob", "--json")
    assert made.returncode == 0, made.stderr
    bob = {**env, "LABQ_TOKEN": json.loads(made.stdout)["secret"]}
    job_file = tmp_path / "long.yaml"
    job_file.write_text(OVERRUNS.format(name="root's"))
    assert cli(env, "job", "submit", str(job_file)).returncode == 0
    refused = cli(bob, "job", "extend", "1", "--by", "1m")
    assert refused.returncode != 0
    assert "may not change it" in refused.stderr
    assert client.get("/jobs/1").json()["sets"][0]["extended"] == 0
    assert cli(bob, "job", "clone", "1").returncode == 0  # anyone may clone
    assert client.get("/jobs/2").json()["owner"] == "bob"
