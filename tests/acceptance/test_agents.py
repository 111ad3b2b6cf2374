"""Lab agents end to end: a real ``labq server`` and real ``labq agent`` processes.

The server beats every second and gives a quiet supervisor up after a few
seconds (``health.heartbeat_timeout``), so the failures of issue 13 show fast:
an agent killed and restarted (its set adopted and finished), an agent left
down (its set aborted and retried in the other agent's lab), an agent cut off
from the server (its supervisor stops the tasks before the server gives the
systems away; no set runs twice), and what an agent token may not do.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from .agents import (
    Agent,
    Proxy,
    Server,
    agent_command,
    agent_server,
    agents,
    wait_state,
    wait_until,
)
from .conftest import fresh_pg_database

pytestmark = pytest.mark.slow

# Two at a time at most (the alone phase runs four tests at once): they check fences and
# leases of seconds. With all five free to run at once, one failed in ten runs of the phase
# (its cause not found: the run's files were gone); two at a time is how they had run clean.
AGENTS_A = pytest.mark.xdist_group("agents-a")
AGENTS_B = pytest.mark.xdist_group("agents-b")


def two_host_job(lab: str) -> dict[str, object]:
    task = {"name": "where", "run": 'echo "$LABQ_FQDN in $LABQ_LAB at $PWD"'}
    recipe = {"host": {"lab": lab}, "tasks": [task]}
    return {"recipe_sets": [{"recipes": [recipe, recipe]}]}


def ticking_job(
    host: dict[str, object], ticks: int, *, retries: int = 0, gate: Path | None = None
) -> dict[str, object]:
    """``ticks`` ticks half a second apart. With a ``gate``, after tick 2 it makes
    ``<gate>.waiting`` and waits for ``gate`` (the log may hold the last bytes back a while)."""
    wait = (
        f"; if [ $i = 2 ]; then touch {gate}.waiting; while [ ! -e {gate} ]; do sleep 0.1; done; fi"
        if gate
        else ""
    )
    run = f'for i in $(seq 1 {ticks}); do echo "tick $i"{wait}; sleep 0.5; done'
    return {
        "recipe_sets": [
            {
                "max_retries": retries,
                "recipes": [{"host": host, "tasks": [{"name": "ticks", "run": run}]}],
            }
        ]
    }


@pytest.fixture
def pg_database():
    with fresh_pg_database("labq_agents") as url:
        yield url


def make_agent(server: Server, tmp_path: Path, name: str, *labs: str, url: str = "") -> Agent:
    token = server.agent_token(name, *labs)
    return Agent(url or server.url, token, tmp_path / f"{name}-data", tmp_path / f"{name}.log")


def task_logs(server: Server, job_id: int) -> dict[str, str]:
    listing = server.client.get(f"/jobs/{job_id}/logs").json()["logs"]
    files = [f for entry in listing for f in entry["files"] if "/task-" in f]
    return {f: server.log_text(job_id, f) for f in files}


# --- (a) two agents, two labs, logs read through the API ---------------------------------


@AGENTS_A
@pytest.mark.postgres
def test_two_agents_run_a_two_host_job_each_in_their_own_lab(tmp_path, pg_database):
    with agent_server(tmp_path, pg_database) as server:
        server.lab("east", "e1.east", "e2.east")
        server.lab("west", "w1.west", "w2.west")
        east = make_agent(server, tmp_path, "east-1", "east")
        west = make_agent(server, tmp_path, "west-1", "west")
        with agents(east.start(), west.start()):
            jobs = {
                "east": server.submit(two_host_job("east")),
                "west": server.submit(two_host_job("west")),
            }
            for job_id in jobs.values():
                job = wait_state(server, job_id, ("completed", "aborted", "cancelled"))
                assert (job["state"], job["result"]) == ("completed", "pass"), job
            for lab, agent in (("east", east), ("west", west)):
                logs = task_logs(server, jobs[lab])
                assert len(logs) == 2
                for path, body in logs.items():
                    fqdn = path.split("/")[-2]
                    # run by this lab's agent, in its own data directory
                    assert f"{fqdn} in {lab} at {agent.data}" in body, body
            listed = {a["name"]: a for a in server.client.get("/agents").json()["agents"]}
            assert {n: a["state"] for n, a in listed.items()} == {
                "east-1": "online",
                "west-1": "online",
            }
        assert east.proc is not None
        assert east.proc.returncode == 0
        assert "Traceback" not in east.output() + west.output()


# --- (b) an agent killed mid-task: restarted, it adopts; left down, the set moves on ------


@AGENTS_B
def test_an_agent_killed_mid_task_and_restarted_adopts_and_finishes_the_set(tmp_path):
    # the task waits at tick 2 until the agent is back, however long a restart takes; the
    # lease (half the timeout: 60 s) outlasts a restart on a loaded machine
    gate = tmp_path / "agent-is-back"
    with agent_server(tmp_path, f"sqlite:///{tmp_path / 'labq.db'}", timeout=120) as server:
        server.lab("east", "e1.east")
        east = make_agent(server, tmp_path, "east-1", "east")
        with agents(east.start()):
            job_id = server.submit(ticking_job({"lab": "east"}, 12, gate=gate))
            wait_until(Path(f"{gate}.waiting").exists, 90, east.output)  # at tick 2
            east.kill()
            assert east.supervisor_pids(), "the supervisor outlives its agent"
            east.start()
            wait_until(lambda: "adopted" in east.output(), 60, east.output)
            gate.touch()
            job = wait_state(server, job_id, ("completed", "aborted", "cancelled"), timeout=120)
            assert (job["state"], job["result"]) == ("completed", "pass"), job
            (body,) = task_logs(server, job_id).values()
            assert re.findall(r"tick (\d+)", body) == [str(i) for i in range(1, 13)]
            assert "adopted (its supervisor running)" in east.output()


@AGENTS_B
def test_an_agent_left_down_has_its_set_aborted_and_retried_in_the_other_lab(tmp_path):
    with agent_server(tmp_path, f"sqlite:///{tmp_path / 'labq.db'}", timeout=6) as server:
        server.lab("east", "e1.east")
        server.lab("west")
        east = make_agent(server, tmp_path, "east-1", "east")
        west = make_agent(server, tmp_path, "west-1", "west")
        with agents(east.start(), west.start()):
            job_id = server.submit(ticking_job({}, 16, retries=1))
            wait_until(lambda: list((east.data / "logs").rglob("task-*")), 90)
            # only now is there another lab the retry could go to
            added = server.client.post("/systems", json={"fqdn": "w1.west", "lab": "west"})
            assert added.status_code == 201
            east.kill()
            began = time.monotonic()
            wait_until(lambda: not east.supervisor_pids(), 15, east.output)
            stopped = time.monotonic() - began
            assert stopped < 6, "the supervisor stops its tasks within the lease (and a beat)"
            job = wait_state(server, job_id, ("completed", "aborted", "cancelled"), timeout=90)
            assert job["state"] == "completed", job
            first, retry = job["sets"]
            assert first["state"] == "aborted"
            assert "heart-beating" in str(first["stop_reason"]), first
            (recipe,) = first["recipes"]
            assert recipe["system"] == "e1.east"
            (retried,) = retry["recipes"]
            assert (retried["system"], retry["state"]) == ("w1.west", "completed")
            east_log = next((east.data / "logs").rglob("task-*")).read_text()
            assert "killed" in east_log  # the fence stopped the task on the agent's host


# --- (c) an agent token is good for its own labs' sets only; no database URL anywhere ----


@AGENTS_B
def test_an_agent_token_cannot_touch_another_labs_set_and_agents_never_hold_the_database(
    tmp_path,
):
    database = f"sqlite:///{tmp_path / 'labq.db'}"
    with agent_server(tmp_path, database) as server:
        server.lab("east", "e1.east")
        server.lab("west", "w1.west")
        east = make_agent(server, tmp_path, "east-1", "east")
        west = make_agent(server, tmp_path, "west-1", "west")
        both = server.agent_token("both-1", "east", "west")
        refused_at_start(server, tmp_path, both)
        with agents(east.start(), west):
            job_id = server.submit(ticking_job({"lab": "west"}, 20))
            # a token of both labs, narrowed to east (labq agent --lab east), is not given it
            with agent_client(server, both) as narrowed:
                answer = narrowed.post("/agent/claim", json={"max": 5, "wait": 2, "labs": ["east"]})
                assert answer.json() == {"sets": []}
            west.start()
            wait_until(lambda: list((west.data / "sets").glob("set-*/claim.json")), 90)
            (claim_file,) = (west.data / "sets").glob("set-*/claim.json")
            work = json.loads(claim_file.read_text())
            set_id, claim = work["set"], work["claim"]
            with agent_client(server, east.token) as thief:
                event = {"seq": 1, "kind": "task_started", "task": 1}
                body = {"claim": claim, "events": [event]}
                assert thief.post(f"/agent/sets/{set_id}/report", json=body).status_code == 409
                put = thief.put(
                    f"/agent/sets/{set_id}/logs",
                    params={"path": "supervisor.log", "offset": 0},
                    content=b"forged\n",
                    headers={"X-Labq-Claim": claim},
                )
                assert put.status_code == 403
                ended = thief.post(f"/agent/sets/{set_id}/ended", json={"claim": claim})
                assert ended.status_code == 409
                assert thief.post("/agent/claim", json={"max": 5, "wait": 0}).json() == {"sets": []}
                assert thief.get(f"/jobs/{job_id}/logs").status_code == 401  # no reading
            wait_until(west.supervisor_pids, 10)  # the set's supervisor is looked at too
            check_no_database_url(database, east, west)
            job = wait_state(server, job_id, ("completed", "aborted", "cancelled"))
            assert (job["state"], job["result"]) == ("completed", "pass"), job
            kept = server.data / "logs" / f"set-{set_id}" / "supervisor.log"
            assert "forged" not in kept.read_text()
            assert f"set {set_id} ends completed" in kept.read_text()


def agent_client(server: Server, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=f"{server.url}/api/v1", headers={"Authorization": f"Bearer {token}"}, timeout=20
    )


def refused_at_start(server: Server, tmp_path: Path, both: str) -> None:
    """An agent with a bad token, or told a lab its token does not serve, says so in one line."""
    for token, extra, said in (
        ("lqa_nonsense", (), "labq agent: the agent token is unknown or revoked"),
        (both, ("--lab", "north"), "labq agent: the agent token does not serve lab(s) north"),
    ):
        command = [*agent_command(), "--url", server.url, "--data-dir", str(tmp_path / "x"), *extra]
        env = {k: v for k, v in os.environ.items() if not k.startswith("LABQ_")}
        done = subprocess.run(
            command,
            env={**env, "LABQ_AGENT_TOKEN": token},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 1
        assert done.stderr.startswith(said), done.stderr
        assert len(done.stderr.splitlines()) == 1, done.stderr


def check_no_database_url(database: str, *made: Agent) -> None:
    needle = database.encode()
    path = make_url(database).database
    assert path
    for agent in made:
        assert agent.proc is not None
        assert all(not k.startswith("LABQ_DB") for k in agent.env)
        pids = [agent.proc.pid, *agent.supervisor_pids()]
        assert len(pids) >= 1
        for pid in pids:
            for name in ("cmdline", "environ"):
                try:
                    raw = Path(f"/proc/{pid}/{name}").read_bytes()
                except PermissionError:  # a supervisor is non-dumpable: not even we may read it
                    continue
                except FileNotFoundError:
                    continue
                assert needle not in raw, (pid, name)
                assert path.encode() not in raw, (pid, name)
        for file in agent.data.rglob("*"):
            if file.is_file():
                assert path.encode() not in file.read_bytes(), file


# --- (d) a partition longer than the lease: the tasks stop, no set runs twice -----------


@AGENTS_A
def test_an_agent_cut_off_from_the_server_stops_its_tasks_and_no_set_runs_twice(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    with agent_server(tmp_path, f"sqlite:///{tmp_path / 'labq.db'}", timeout=6) as server:
        server.lab("east", "e1.east", "e2.east")  # the retry needs another system
        proxy = Proxy(int(server.url.rsplit(":", 1)[1]))
        east = make_agent(server, tmp_path, "east-1", "east", url=proxy.url)
        run = (
            f'echo "start $LABQ_SET_ID $(date +%s.%N)" >> {marks}/starts; '
            f"trap 'echo \"stop $LABQ_SET_ID $(date +%s.%N)\" >> {marks}/stops; exit 1' TERM; "
            "for i in $(seq 1 40); do sleep 0.25; done"
        )
        job = {
            "recipe_sets": [
                {
                    "max_retries": 1,
                    "recipes": [{"host": {"lab": "east"}, "tasks": [{"name": "long", "run": run}]}],
                }
            ]
        }
        try:
            with agents(east.start()):
                job_id = server.submit(job)
                wait_until(lambda: (marks / "starts").exists(), 90)
                proxy.pause()
                cut = time.time()
                # the server gives the set up after its heartbeat timeout ...
                wait_until(lambda: server.results(job_id)["sets"][0]["state"] == "aborted", 30)
                given_up = time.time()
                # ... and the agent's supervisor had stopped the task before that
                wait_until(lambda: (marks / "stops").exists(), 5)
                (stop_line,) = (marks / "stops").read_text().splitlines()
                stopped_at = float(stop_line.split()[2])
                assert cut < stopped_at < given_up, (cut, stopped_at, given_up)
                proxy.resume()
                wait_until(lambda: "lost (the server ended it)" in east.output(), 30, east.output)
                # the retry may run (on the other system) — or, when the answer to the claim
                # that took it was lost in the partition, be aborted unrun after the timeout
                done = wait_state(server, job_id, ("completed", "aborted", "cancelled"), 120)
                assert done["sets"][0]["state"] == "aborted"
        finally:
            proxy.close()
        starts = [line.split() for line in (marks / "starts").read_text().splitlines()]
        assert len({s[1] for s in starts}) == len(starts), starts  # 0 sets ran twice
        assert all(float(s[2]) > stopped_at for s in starts[1:])  # a retry after the stop
