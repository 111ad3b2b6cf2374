"""Webhooks, a job's notifications and retention through the API: who may, and bad input."""

from __future__ import annotations

from datetime import timedelta

import pytest

from labq.dispatch.logs import set_log_dir
from labq.store import reading, transaction
from tests.api.conftest import API, Lab, submit

URL = "https://hooks.example/labq"


def add(lab: Lab, who: str, **body: object) -> tuple[int, dict]:
    answer = lab.client.post(f"{API}/webhooks", json={"url": URL, **body}, headers=lab.auth(who))
    return answer.status_code, answer.json()


@pytest.mark.parametrize(
    ("who", "body", "status"),
    [
        ("alice", {}, 201),  # her own
        ("alice", {"user": "alice"}, 201),
        ("alice", {"group": "kernel-qe"}, 201),  # a member
        ("root", {"user": "bob"}, 201),  # an admin, for anyone
        ("root", {"group": "everybody"}, 201),
        ("bob", {"user": "alice"}, 403),
        ("bob", {"group": "kernel-qe"}, 403),  # not a member
        ("alice", {"group": "everybody"}, 403),  # everyone's: admins only
        ("root", {"user": "nobody"}, 404),
    ],
)
def test_who_may_add_a_webhook(lab: Lab, who: str, body: dict, status: int) -> None:
    got, answer = add(lab, who, **body)
    assert got == status, answer
    if status == 201:
        assert answer["secret"].startswith("whsec_")


def test_the_secret_is_shown_once_and_lists_show_whose_hooks(lab: Lab) -> None:
    _, mine = add(lab, "alice")
    _, group = add(lab, "carol", group="kernel-qe")
    _, bobs = add(lab, "bob")
    listed = lab.get("/webhooks", "alice").json()["webhooks"]
    assert [h["id"] for h in listed] == [mine["id"], group["id"]]
    assert all("secret" not in h for h in listed)
    assert [h["id"] for h in lab.get("/webhooks", "bob").json()["webhooks"]] == [bobs["id"]]
    assert len(lab.get("/webhooks", "root").json()["webhooks"]) == 3


def test_removing_a_webhook_is_for_its_owner_group_or_an_admin(lab: Lab) -> None:
    _, group = add(lab, "alice", group="kernel-qe")
    _, mine = add(lab, "alice")
    refused = lab.client.delete(f"{API}/webhooks/{mine['id']}", headers=lab.auth("bob"))
    assert refused.status_code == 403
    assert "may not remove webhook" in refused.json()["error"]["message"]
    by_member = lab.client.delete(f"{API}/webhooks/{group['id']}", headers=lab.auth("carol"))
    assert by_member.status_code == 200
    by_admin = lab.client.delete(f"{API}/webhooks/{mine['id']}", headers=lab.auth("root"))
    assert by_admin.status_code == 200
    assert lab.get("/webhooks", "root").json()["webhooks"] == []
    gone = lab.client.delete(f"{API}/webhooks/{mine['id']}", headers=lab.auth("root"))
    assert gone.status_code == 404


@pytest.mark.parametrize(
    ("body", "place"),
    [
        ({"url": "ftp://hooks.example/x"}, "url"),
        ({"url": "https://"}, "url"),
        ({"url": "not a url"}, "url"),
        ({"url": URL, "user": "alice", "group": "kernel-qe"}, "group"),
        ({"url": URL, "colour": "red"}, "colour"),
    ],
)
def test_bad_webhooks_are_refused_in_one_line(lab: Lab, body: dict, place: str) -> None:
    answer = lab.client.post(f"{API}/webhooks", json=body, headers=lab.auth("root"))
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert "\n" not in error["message"]
    assert error["place"] == place


def test_a_jobs_notifications_are_read_by_those_who_may_change_it(lab: Lab) -> None:
    job_id = submit(lab, "alice", group="kernel-qe")
    for who in ("alice", "carol", "root"):
        answer = lab.get(f"/jobs/{job_id}/notifications", who)
        assert answer.status_code == 200
        assert answer.json() == {"id": job_id, "notifications": []}
    refused = lab.get(f"/jobs/{job_id}/notifications", "bob")
    assert refused.status_code == 403
    assert lab.get("/jobs/999/notifications", "root").status_code == 404


def test_retention_is_told_and_an_unknown_tag_refused_at_submit(lab: Lab) -> None:
    job_id = submit(lab, "alice", metadata={"retention_tag": "60days"})
    answer = lab.get(f"/jobs/{job_id}/retention", "bob").json()
    assert (answer["tag"], answer["lifetime_days"], answer["ended_at"]) == ("60days", 60.0, None)
    assert answer["deleted_at"] is None
    assert lab.get(f"/jobs/{submit(lab, 'bob')}/retention").json()["tag"] == "scratch"
    refused = lab.client.post(
        f"{API}/jobs",
        json={
            "recipe_sets": [{"recipes": [{"tasks": [{"name": "t", "run": "true"}]}]}],
            "metadata": {"retention_tag": "forever-ish"},
        },
        headers=lab.auth("alice"),
    )
    assert refused.status_code == 422
    assert "retention tag 'forever-ish' is not one of" in refused.json()["error"]["message"]


def test_pruning_is_for_admins_and_the_api_then_says_when(lab: Lab) -> None:
    job_id = submit(lab, "alice")
    with transaction(lab.engine) as repo:
        repo.queue.cancel_job(job_id, actor="alice", now=lab.clock())
        set_ids = [s.id for s in repo.jobs.load_job(job_id).sets]
    folder = set_log_dir(lab.data_dir, set_ids[0])
    folder.mkdir(parents=True)
    (folder / "supervisor.log").write_text("done\n")
    assert lab.post("/logs/prune", "alice").status_code == 403
    assert lab.post("/logs/prune", "root").json() == {"pruned": []}  # not expired yet
    lab.clock.advance(timedelta(days=31).total_seconds())
    answer = lab.post("/logs/prune", "root")
    assert answer.json() == {"pruned": [{"job": job_id, "tag": "scratch", "files": 1, "bytes": 5}]}
    assert not folder.exists()
    retention = lab.get(f"/jobs/{job_id}/retention").json()
    assert retention["deleted_at"] is not None
    assert lab.get(f"/jobs/{job_id}/logs").json()["logs_deleted_at"] == retention["deleted_at"]
    with reading(lab.engine) as repo:
        [entry] = [
            e for e in repo.log.activity(kind="job", object_id=job_id) if e.action == "logs-deleted"
        ]
    assert entry.actor == "root"
