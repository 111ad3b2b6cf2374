"""The server's side of lab agents, spoken to over HTTP by a hand-written agent.

No agent process here: the test is the agent, so every answer of the protocol
is checked as the server gives it (docs/operations.md, Lab agents). A lab
named by an agent token gets no supervisor of the server's own: its sets wait,
claimed but untaken, for an agent.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import httpx

from .conftest import wait_for

ONE = {
    "recipe_sets": [
        {"recipes": [{"host": {"lab": "far"}, "tasks": [{"name": "t", "run": "true"}]}]}
    ]
}


@contextmanager
def agent_client(url: str, token: str) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=f"{url}/api/v1/agent", headers={"Authorization": f"Bearer {token}"}, timeout=40
    ) as client:
        yield client


def setup_labs(client: httpx.Client) -> None:
    for lab in ("far", "near"):
        assert client.post("/labs", json={"name": lab}).status_code == 201
        added = client.post("/systems", json={"fqdn": f"a.{lab}", "lab": lab})
        assert added.status_code == 201, added.text


def claim(agent: httpx.Client, wait: float = 10.0) -> list[dict[str, Any]]:
    answer = agent.post("/claim", json={"max": 5, "wait": wait})
    assert answer.status_code == 200, answer.text
    sets: list[dict[str, Any]] = answer.json()["sets"]
    return sets


def now() -> str:
    return datetime.now(UTC).isoformat()


def test_an_agent_claims_runs_reports_and_ends_a_set(server):
    client, _data, _env = server
    setup_labs(client)
    made = client.post("/agents", json={"name": "far-1", "labs": ["far"]})
    assert made.status_code == 201, made.text
    token = made.json()["token"]
    assert token.startswith("lqa_")
    with agent_client(str(client.base_url).rstrip("/").removesuffix("/api/v1"), token) as agent:
        run_one_set(client, agent)


def run_one_set(client: httpx.Client, agent: httpx.Client) -> None:
    hello = agent.post("/hello", json={"version": "test", "host": "here", "max_sets": 4})
    assert hello.status_code == 200, hello.text
    assert hello.json()["labs"] == ["far"]

    job_id = client.post("/jobs", json=ONE).json()["id"]
    began = time.monotonic()
    (work,) = claim(agent)
    assert time.monotonic() - began < 5
    set_id, claim_token = work["set"], work["claim"]
    (recipe,) = work["plan"]["recipes"]
    (task,) = recipe["tasks"]
    assert work["env"]["LABQ_TOKEN"].startswith("lq_")
    assert claim(agent, wait=0) == []  # claimed once, by exactly one taker

    events = [
        {"seq": 1, "kind": "recipe", "recipe": recipe["id"], "state": "installing", "at": now()},
        {"seq": 2, "kind": "recipe", "recipe": recipe["id"], "state": "running", "at": now()},
        {"seq": 3, "kind": "task_started", "task": task["id"], "at": now()},
    ]
    sent = agent.post(f"/sets/{set_id}/report", json={"claim": claim_token, "events": events})
    assert sent.json() == {"applied": 3}
    again = agent.post(f"/sets/{set_id}/report", json={"claim": claim_token, "events": events})
    assert again.json() == {"applied": 3}  # a retried report applies once
    log = f"a.far/task-{task['id']}-t.log"
    headers = {"X-Labq-Claim": claim_token}
    put = agent.put(
        f"/sets/{set_id}/logs",
        params={"path": log, "offset": 0},
        content=b"hello\n",
        headers=headers,
    )
    assert put.json() == {"size": 6}
    put = agent.put(
        f"/sets/{set_id}/logs",
        params={"path": log, "offset": 3},
        content=b"lo\nworld\n",
        headers=headers,
    )
    assert put.json() == {"size": 12}  # the overlap is kept once
    gap = agent.put(
        f"/sets/{set_id}/logs", params={"path": log, "offset": 40}, content=b"x", headers=headers
    )
    assert gap.status_code == 409
    assert gap.json()["size"] == 12
    outside = agent.put(
        f"/sets/{set_id}/logs", params={"path": "../x", "offset": 0}, content=b"x", headers=headers
    )
    assert outside.status_code == 422
    beat = agent.post("/beat", json={"sets": [{"set": set_id, "claim": claim_token}], "running": 1})
    assert beat.json()["sets"] == {str(set_id): "carry on"}
    finished = [
        {
            "seq": 4,
            "kind": "task_finished",
            "task": task["id"],
            "exit_code": 0,
            "result": "pass",
            "log": log,
            "message": "exit 0",
            "at": now(),
        },
        {"seq": 5, "kind": "recipe", "recipe": recipe["id"], "state": "completed", "at": now()},
    ]
    sent = agent.post(f"/sets/{set_id}/report", json={"claim": claim_token, "events": finished})
    assert sent.json() == {"applied": 5}
    ended = agent.post(f"/sets/{set_id}/ended", json={"claim": claim_token, "code": 0})
    assert ended.json() == {"ended": True}
    job = wait_for(client, job_id, timeout=20)
    assert job["state"] == "completed"
    assert job["result"] == "pass"
    text = client.get(f"/jobs/{job_id}/logs/file", params={"path": f"logs/set-{set_id}/{log}"})
    assert text.status_code == 200, text.text
    assert text.text == "hello\nworld\n"
    # the system went back to the lab
    deadline = time.monotonic() + 20
    while client.get("/systems/a.far").json()["usage"] != "idle":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    listed = client.get("/agents").json()["agents"]
    assert [(a["name"], a["state"], a["version"]) for a in listed] == [("far-1", "online", "test")]


def test_an_agent_token_is_good_for_its_own_labs_sets_only(server):
    client, _data, _env = server
    setup_labs(client)
    far = client.post("/agents", json={"name": "far-1", "labs": ["far"]}).json()["token"]
    near = client.post("/agents", json={"name": "near-1", "labs": ["near"]}).json()["token"]
    base = str(client.base_url).rstrip("/").removesuffix("/api/v1")
    with agent_client(base, far) as far_agent, agent_client(base, near) as near_agent:
        refused_elsewhere(client, base, far, far_agent, near_agent)


def refused_elsewhere(
    client: httpx.Client, base: str, far: str, far_agent: httpx.Client, near_agent: httpx.Client
) -> None:
    client.post("/jobs", json=ONE)
    (work,) = claim(far_agent)
    assert claim(near_agent, wait=1) == []  # another lab's set is never offered
    set_id, claim_token = work["set"], work["claim"]
    body = {
        "claim": claim_token,
        "events": [{"seq": 1, "kind": "recipe", "recipe": 1, "state": "installing"}],
    }
    assert near_agent.post(f"/sets/{set_id}/report", json=body).status_code == 409
    beat = near_agent.post("/beat", json={"sets": [{"set": set_id, "claim": claim_token}]})
    assert beat.json()["sets"] == {str(set_id): "lost"}
    put = near_agent.put(
        f"/sets/{set_id}/logs",
        params={"path": "x.log", "offset": 0},
        content=b"x",
        headers={"X-Labq-Claim": claim_token},
    )
    assert put.status_code == 403
    # an agent token opens nothing but the agent's calls, and a user's token none of those
    assert (
        httpx.get(f"{base}/api/v1/jobs", headers={"Authorization": f"Bearer {far}"}).status_code
        == 401
    )
    assert (
        httpx.post(
            f"{base}/api/v1/agent/claim", json={"max": 1}, headers=client.headers
        ).status_code
        == 401
    )
    # a revoked agent is refused at once
    assert client.delete("/agents/near-1").status_code == 200
    assert near_agent.post("/claim", json={"max": 1}).status_code == 401


def test_an_extension_reaches_the_agent_with_the_next_beat(server):
    client, _data, _env = server
    setup_labs(client)
    token = client.post("/agents", json={"name": "far-1", "labs": ["far"]}).json()["token"]
    job = {**ONE, "recipe_sets": [{**ONE["recipe_sets"][0], "max_time": 600}]}
    job_id = client.post("/jobs", json=job).json()["id"]
    base = str(client.base_url).rstrip("/").removesuffix("/api/v1")
    with agent_client(base, token) as agent:
        (work,) = claim(agent)
        set_id, claim_token = work["set"], work["claim"]
        mine = [{"set": set_id, "claim": claim_token}]
        assert agent.post("/beat", json={"sets": mine}).json()["deadlines"] == {str(set_id): 600.0}
        extended = client.post(f"/jobs/{job_id}/extend", json={"by": 60})
        assert extended.status_code == 200, extended.text
        assert agent.post("/beat", json={"sets": mine}).json()["deadlines"] == {str(set_id): 660.0}
