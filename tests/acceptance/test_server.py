"""``labq server`` as a subprocess, driven over HTTP, running a real two-host job."""

from __future__ import annotations

import json
import time

from tests.acceptance.conftest import cli, wait_for

JOB = """
whiteboard: two hosts
recipe_sets:
  - max_time: 120
    recipes:
      - role: server
        tasks:
          - name: hello
            run: 'echo "I am $LABQ_FQDN, client is $CLIENT" | tee hello.txt'
            timeout: 30
      - role: client
        tasks:
          - {name: hello, run: 'echo "server is $SERVER"', timeout: 30}
"""


def test_a_two_host_job_runs_to_completion(server, tmp_path):
    client, data, env = server
    assert cli(env, "lab", "add", "lab1").returncode == 0
    for fqdn in ("a.lab1", "b.lab1"):
        added = cli(env, "system", "add", fqdn, "--lab", "lab1", "--attr", "memory_mb=4096")
        assert added.returncode == 0, added.stderr
    job_file = tmp_path / "two-hosts.yaml"
    job_file.write_text(JOB)
    submitted = cli(env, "job", "submit", str(job_file), "--wait", "--json")
    assert submitted.returncode == 0, submitted.stderr
    job_id = json.loads(submitted.stdout)["id"]
    job = wait_for(client, job_id)
    assert job["state"] == "completed"
    assert job["result"] == "pass"
    (rs,) = job["sets"]
    systems = {r["system"] for r in rs["recipes"]}
    assert systems == {"a.lab1", "b.lab1"}
    # each role's FQDNs reached the other recipe's task, and the logs were archived
    logs = {p.name: p.read_text() for p in (data / "logs").rglob("task-*.log")}
    text_ = "\n".join(logs.values())
    server_fqdn = next(r["system"] for r in rs["recipes"] if r["tasks"][0]["id"] == 1)
    client_fqdn = (systems - {server_fqdn}).pop()
    assert f"client is {client_fqdn}" in text_
    assert f"server is {server_fqdn}" in text_
    listed = client.get(f"/jobs/{job_id}/logs").json()
    assert listed  # the API lists the archived logs too
    # the file the server's task wrote is in its workspace
    assert (data / "workspaces" / server_fqdn / "hello.txt").read_text().startswith("I am ")
    # every recipe went through the whole lifecycle, in order
    for recipe in client.get(f"/jobs/{job_id}/history").json()["recipes"]:
        states = [h["state"] for h in recipe["history"]]
        assert states == ["new", "scheduled", "waiting", "installing", "running", "completed"]
    # the systems go idle once the scheduler has heard the set end; their history shows all
    deadline = time.monotonic() + 20
    while {client.get(f"/systems/{f}").json()["usage"] for f in systems} != {"idle"}:
        assert time.monotonic() < deadline, "the systems were not released"
        time.sleep(0.2)
    for fqdn in systems:
        history = client.get(f"/systems/{fqdn}/history").json()["history"]
        usages = [row["usage"] for row in history]
        for usage in ("scheduled", "waiting", "installing", "running", "idle"):
            assert usage in usages
        assert usages.index("scheduled") < usages.index("running") < len(usages)
    # the accounting counts the two recipes, both passed, for the job's owner
    report = cli(env, "usage", "--by", "user", "--csv")
    assert report.returncode == 0, report.stderr
    header, *rows = report.stdout.splitlines()
    assert header == "user,system_hours,jobs,recipes,pass_rate,mean_wait_s"
    (row,) = rows
    owner, hours, jobs, recipes, rate, _wait = row.split(",")
    assert owner == client.get(f"/jobs/{job_id}").json()["owner"]
    assert (float(hours) > 0, jobs, recipes, rate) == (True, "1", "2", "1.0")
