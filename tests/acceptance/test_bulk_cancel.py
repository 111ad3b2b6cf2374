"""Bulk cancel by owner and by run, refusals listed, and the queue's plain reasons, against a
real ``labq server``."""

from __future__ import annotations

import json
import time

import httpx

from tests.acceptance.test_cli_api import as_user, data, one_line_refusal

__all__ = ["as_user"]

BLOCKER = """
whiteboard: blocker
recipe_sets:
  - max_time: 600
    recipes:
      - host: {arch: aarch64}
        tasks:
          - {name: nap, run: sleep 60, timeout: 120}
"""
WAITER = """
whiteboard: nightly {n}
recipe_sets:
  - recipes:
      - host: {{arch: aarch64}}
        tasks:
          - {{name: t, run: 'true'}}
"""


def _until(check, what: str, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"no {what} after {timeout}s")


def test_bulk_cancel_by_owner_and_by_run_lists_refusals(as_user, live_server, tmp_path) -> None:
    run = as_user
    run("lab", "add", "lab1")
    run("system", "add", "a.lab1", "--lab", "lab1", "--arch", "aarch64")
    tokens = {}
    for name in ("alice", "bob"):
        run("user", "add", name)
        tokens[name] = data(run("token", "create", name, "--user", name, "--json"))["secret"]
    (tmp_path / "blocker.yaml").write_text(BLOCKER)
    blocker = data(run("job", "submit", str(tmp_path / "blocker.yaml"), "--json"))["id"]
    api = httpx.Client(
        base_url=f"{live_server.url}/api/v1",
        headers={"Authorization": f"Bearer {live_server.token}"},
    )
    _until(lambda: api.get(f"/jobs/{blocker}").json()["state"] == "running", "running blocker")
    files = []
    for n in range(4):
        path = tmp_path / f"nightly{n}.yaml"
        path.write_text(WAITER.format(n=n))
        files.append(str(path))
    alice, bob = tokens["alice"], tokens["bob"]
    own = [data(run("job", "submit", f, "--json", token=alice))["id"] for f in files[:2]]
    in_run = data(run("job", "submit", *files[2:], "--run", "nightly-1", "--json", token=alice))
    bobs = data(run("job", "submit", files[0], "--json", token=bob))["id"]

    # the queue says what they wait for, in words; filters pick rows
    rows = _until(lambda: data(run("queue", "--owner", "alice", "--json"))["queue"], "rows")
    assert {r["owner"] for r in rows} == {"alice"}
    assert {r["reason"] for r in rows} == {
        "waits for 1 system matching arch=aarch64: 1 busy until ~"
        + time.strftime("%H:%M UTC", time.gmtime(_started(api, blocker) + 600))
    }
    assert [r["job_id"] for r in data(run("queue", "--run", "nightly-1", "--json"))["queue"]] == (
        in_run["jobs"]
    )
    assert "nightly 0" in run("queue", "--owner", "bob").stdout

    # each job's reason is written by the scheduler's pass after its submission: wait for all
    def reasoned():
        found = data(run("job", "list", "--owner", "alice", "--whiteboard", "nightly*", "--json"))
        waiting = all((j["reason"] or "").startswith("waits for 1 system") for j in found["jobs"])
        return found if waiting else None

    listed = _until(reasoned, "reasons for all four")
    assert listed["total"] == 4

    # not a terminal and no --yes: refused in one line, nothing changed
    asked = run("job", "cancel", "--owner", "alice", token=alice, ok=False)
    one_line_refusal(asked, "would change 4 job(s)", "--yes")
    # alice may not cancel bob's job: it is listed with why, and the command exits 1
    refused = run("job", "cancel", "--owner", "bob", "--yes", token=alice, ok=False)
    assert refused.returncode == 1
    assert f"job {bobs} belongs to 'bob'; 'alice' may not change it" in refused.stdout
    assert "no job cancelled (1 matched)" in refused.stdout
    # by run: the run's two jobs, and only those
    by_run = run("job", "cancel", "--run", "nightly-1", "--yes", token=alice)
    assert by_run.stdout.startswith(f"2 job(s) cancelled: {in_run['jobs'][0]}, {in_run['jobs'][1]}")
    # by owner: what is left of alice's
    answer = json.loads(
        run("job", "cancel", "--owner", "alice", "--yes", "--json", token=alice).stdout
    )
    assert [c["id"] for c in answer["changed"]] == own
    assert answer["unchanged"] == 2  # the run's, already cancelled
    states = {j: api.get(f"/jobs/{j}").json()["state"] for j in [*own, *in_run["jobs"], bobs]}
    assert states == {**dict.fromkeys([*own, *in_run["jobs"]], "cancelled"), bobs: "queued"}
    # the admin may: bob's goes too, and the blocker by id
    assert run("job", "cancel", "--owner", "bob", "--yes").stdout.startswith("1 job(s) cancelled")
    run("job", "cancel", str(blocker))
    api.close()


def _started(api: httpx.Client, job: int) -> float:
    from datetime import datetime

    started = api.get(f"/jobs/{job}").json()["sets"][0]["started_at"]
    return datetime.fromisoformat(started).timestamp()
