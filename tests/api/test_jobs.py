"""Jobs: submit in every format, list and page, show, cancel and priority with permissions."""

from __future__ import annotations

from typing import Any

import pytest

from labq.domain.events import JobsCancelled, JobSubmitted, PriorityChanged
from tests.api.conftest import API, EXAMPLES, Lab, add_example_systems, submit

FORMATS = [
    ("smoke.yaml", "application/yaml", "native"),
    ("beaker.xml", "application/xml", "beaker"),
    ("teuthology.yaml", "application/yaml", "teuthology"),
]


@pytest.mark.parametrize(("name", "media", "fmt"), FORMATS)
def test_submit_examples(lab: Lab, name: str, media: str, fmt: str) -> None:
    add_example_systems(lab.engine)
    text = (EXAMPLES / name).read_bytes()
    answer = lab.client.post(
        f"{API}/jobs", content=text, headers={**lab.auth("alice"), "Content-Type": media}
    )
    assert answer.status_code == 201, answer.text
    job_id = answer.json()["id"]
    assert answer.json()["format"] == fmt
    shown = lab.get(f"/jobs/{job_id}").json()
    assert shown["owner"] == "alice"
    assert shown["source_format"] == fmt
    assert shown["state"] == "new"
    assert shown["sets"][0]["recipes"][0]["tasks"]
    assert lab.events.calls == [(JobSubmitted(job_id), True)]


def test_submit_json_and_format_parameter(lab: Lab) -> None:
    add_example_systems(lab.engine)
    assert submit(lab) == 1
    text = (EXAMPLES / "smoke.yaml").read_bytes()
    answer = lab.client.post(
        f"{API}/jobs?format=native",
        content=text,
        headers={**lab.auth("alice"), "Content-Type": "text/plain"},
    )
    assert answer.status_code == 201
    refused = lab.client.post(
        f"{API}/jobs", content=text, headers={**lab.auth("alice"), "Content-Type": "text/plain"}
    )
    assert refused.status_code == 415
    assert "?format=" in refused.json()["error"]["message"]


def test_group_must_be_the_submitters(lab: Lab) -> None:
    before = lab.activity()
    text = (EXAMPLES / "smoke.yaml").read_bytes()
    answer = lab.client.post(
        f"{API}/jobs", content=text, headers={**lab.auth("bob"), "Content-Type": "application/yaml"}
    )
    assert answer.status_code == 403
    assert answer.json()["error"] == {
        "status": 403,
        "message": "'bob' is not a member of group 'kernel-qe'",
        "place": "group",
    }
    unknown = lab.client.post(
        f"{API}/jobs",
        json={"group": "nobody-here", "recipe_sets": [{"recipes": [{}]}]},
        headers=lab.auth("bob"),
    )
    assert unknown.status_code == 422
    assert "no group 'nobody-here'" in unknown.json()["error"]["message"]
    assert lab.activity() == before
    assert lab.get("/jobs").json()["total"] == 0
    assert lab.events.calls == []


def test_list_filters_and_pages(lab: Lab) -> None:
    ids = [submit(lab, "alice", group="kernel-qe") for _ in range(3)]
    ids += [submit(lab, "bob") for _ in range(2)]
    lab.post(f"/jobs/{ids[0]}/cancel", who="alice")
    everything = lab.get("/jobs").json()
    assert everything["total"] == 5
    assert [j["id"] for j in everything["jobs"]] == ids[::-1]
    page = lab.get("/jobs", limit=2, offset=1).json()
    assert (page["total"], [j["id"] for j in page["jobs"]]) == (5, [ids[3], ids[2]])
    assert lab.get("/jobs", owner="bob").json()["total"] == 2
    assert lab.get("/jobs", group="kernel-qe").json()["total"] == 3
    cancelled = lab.get("/jobs", state="cancelled").json()
    assert [j["id"] for j in cancelled["jobs"]] == [ids[0]]
    assert lab.get("/jobs", state="new", owner="alice").json()["total"] == 2
    for bad in ({"limit": 0}, {"limit": 1001}, {"offset": -1}, {"state": "done"}):
        answer = lab.get("/jobs", **bad)
        assert answer.status_code == 422
        assert answer.json()["error"]["place"] == next(iter(bad))


def test_cancel_permissions(lab: Lab) -> None:
    own = submit(lab, "alice")
    grouped = submit(lab, "alice", group="kernel-qe")
    bobs = submit(lab, "bob")
    lab.events.calls.clear()
    refused = lab.post(f"/jobs/{own}/cancel", who="carol")  # alice's own job, no group
    assert refused.status_code == 403
    assert "may not change it" in refused.json()["error"]["message"]
    assert lab.post(f"/jobs/{grouped}/cancel", who="bob").status_code == 403
    assert lab.post(f"/jobs/{bobs}/cancel", who="alice").status_code == 403
    assert lab.get(f"/jobs/{own}").json()["state"] == "new"
    assert lab.events.calls == []
    done = lab.post(f"/jobs/{own}/cancel", who="alice").json()
    assert done == {"id": own, "cancelled": 1, "note": None}
    answer = lab.post(f"/jobs/{grouped}/cancel", who="carol", json={"reason": "wrong kernel"})
    assert answer.json()["cancelled"] == 1
    assert lab.post(f"/jobs/{bobs}/cancel", who="root").json()["cancelled"] == 1
    again = lab.post(f"/jobs/{bobs}/cancel", who="root").json()
    assert again == {
        "id": bobs,
        "cancelled": 0,
        "note": f"job {bobs} is already cancelled: nothing to cancel",
    }
    assert lab.events.calls == [
        (JobsCancelled(own), True),
        (JobsCancelled(grouped), True),
        (JobsCancelled(bobs), True),
    ]
    assert lab.post("/jobs/999/cancel").status_code == 404


def test_priority_lowering_is_free_raising_needs_admin(lab: Lab) -> None:
    job = submit(lab, "alice", group="kernel-qe")  # normal
    lab.events.calls.clear()
    raised = lab.post(f"/jobs/{job}/priority", who="alice", json={"priority": "high"})
    assert raised.status_code == 403
    assert raised.json()["error"]["message"] == "raising job 1 from normal to high needs an admin"
    assert lab.post(f"/jobs/{job}/priority", who="bob", json={"priority": "low"}).status_code == 403
    lowered = lab.post(f"/jobs/{job}/priority", who="carol", json={"priority": "low"})
    assert lowered.json() == {"id": job, "priority": "low", "sets": [1], "note": None}
    assert lab.events.calls == [(PriorityChanged(job), True)]
    again = lab.post(f"/jobs/{job}/priority", who="root", json={"priority": "urgent"})
    assert again.status_code == 200
    assert lab.get(f"/jobs/{job}").json()["sets"][0]["priority"] == "urgent"
    lab.post(f"/jobs/{job}/cancel", who="root")
    ended = lab.post(f"/jobs/{job}/priority", who="root", json={"priority": "low"}).json()
    assert (ended["sets"], ended["note"]) == (
        [],
        f"job {job} is already cancelled: no set waits, so no priority changed",
    )


def test_show_and_results(lab: Lab) -> None:
    job = submit(lab, "alice", whiteboard="hello")
    shown = lab.get(f"/jobs/{job}").json()
    assert shown["whiteboard"] == "hello"
    assert shown["current_sets"] == [shown["sets"][0]["id"]]
    recipe = shown["sets"][0]["recipes"][0]
    assert (recipe["role"], recipe["state"], recipe["system"]) == ("r0", "new", None)
    results = lab.get(f"/jobs/{job}/results").json()
    assert results["sets"][0]["recipes"][0]["tasks"][0]["status"] == "new"
    missing = lab.get("/jobs/42")
    assert missing.status_code == 404
    assert missing.json() == {"error": {"status": 404, "message": "no job 42"}}


def test_queue_reads_the_scheduler(lab: Lab) -> None:
    from labq.domain.queue import QueueRow

    for _ in range(3):
        submit(lab, "alice", whiteboard="smoke")
    lab.events.rows = [
        QueueRow(7, 3, 1, "high", "normal", 12.5, "none", None, 4.0, 2.0, 15, "a running slot")
    ]
    assert lab.get("/queue").json() == {
        "queue": [
            {
                "set_id": 7,
                "job_id": 3,
                "position": 1,
                "effective": "high",
                "nominal": "normal",
                "age_s": 12.5,
                "hold": "none",
                "lab": None,
                "spv": 4.0,
                "weight": 2.0,
                "age_ticks": 15,
                "waits_for": "a running slot",
                "reason": "",
                "state": "queued",
                "labs": [],
                "owner": "alice",
                "group": None,
                "whiteboard": "smoke",
                "run": None,
                "forecast": None,
            }
        ]
    }
    assert lab.get("/queue", owner="bob").json() == {"queue": []}
    assert len(lab.get("/queue", whiteboard="SM*").json()["queue"]) == 1


def test_forecasts_reach_the_queue_the_job_and_the_job_list(lab: Lab) -> None:
    from labq.domain.queue import QueueRow, SetForecast

    job = submit(lab, "alice", whiteboard="nightly")
    set_id = lab.get(f"/jobs/{job}").json()["current_sets"][0]
    lab.events.rows = [QueueRow(set_id, job, 1, "normal", "normal", 5.0, "none", None)]
    start = 1_795_000_000.4  # a moment with a fraction: shown to the second
    lab.events.forecast = {
        set_id: SetForecast(set_id, start, start + 5100, 5100.2, 300, 23, 5100, "source")
    }
    expected = {
        "set_id": set_id,
        "running": False,
        "start_at": "2026-11-18T11:06:40Z",
        "end_at": "2026-11-18T12:31:40Z",
        "prediction": {
            "seconds": 5100,
            "spread": 300,
            "runs": 23,
            "median": 5100,
            "basis": "source",
        },
        "basis_text": "23 earlier runs of this job, median 1 h 25 min",
    }
    (row,) = lab.get("/queue").json()["queue"]
    assert _utc(row["forecast"]) == expected
    assert [_utc(f) for f in lab.get(f"/jobs/{job}").json()["forecasts"]] == [expected]
    (listed,) = lab.get("/jobs", whiteboard="nightly").json()["jobs"]
    assert [_utc(f) for f in listed["forecasts"]] == [expected]
    lab.events.forecast = {set_id: SetForecast(set_id, None, None, 7200, 0, 0, None, "max_time")}
    (row,) = lab.get("/queue").json()["queue"]
    assert (row["forecast"]["start_at"], row["forecast"]["basis_text"]) == (
        None,
        "no earlier runs; from max_time 2 h",
    )


def _utc(forecast: dict[str, Any]) -> dict[str, Any]:
    """The forecast with its times in one spelling of UTC."""
    return {
        **forecast,
        **{
            k: forecast[k].replace("+00:00", "Z")
            for k in ("start_at", "end_at")
            if forecast[k] is not None
        },
    }
