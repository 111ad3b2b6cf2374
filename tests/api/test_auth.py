"""Tokens: who gets in, who is told 401, and what a set's token may do."""

from __future__ import annotations

import pytest

from labq.store import transaction
from tests.api.conftest import API, T0, Lab, submit


def test_health_needs_no_token(lab: Lab) -> None:
    answer = lab.client.get(f"{API}/health")
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok", "database": "ok"}


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer lq_not-a-real-token"},
        {"Authorization": "Bearer nonsense"},
        {"Authorization": "Basic cm9vdDpyb290"},
    ],
    ids=["missing", "unknown", "malformed", "basic"],
)
def test_no_valid_token_is_401(lab: Lab, headers: dict[str, str]) -> None:
    answer = lab.client.get(f"{API}/jobs", headers=headers)
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"] == "Bearer"
    assert answer.json()["error"]["status"] == 401
    assert "token" in answer.json()["error"]["message"]


def test_revoked_token_is_401(lab: Lab) -> None:
    made = lab.post("/tokens", who="bob", json={"name": "short-lived"})
    assert made.status_code == 201
    secret = made.json()["secret"]
    headers = {"Authorization": f"Bearer {secret}"}
    assert lab.client.get(f"{API}/users/me", headers=headers).json()["name"] == "bob"
    revoked = lab.client.delete(f"{API}/tokens/{made.json()['id']}", headers=headers)
    assert revoked.status_code == 200
    answer = lab.client.get(f"{API}/users/me", headers=headers)
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"] == "Bearer"


def test_expired_token_is_401(lab: Lab) -> None:
    made = lab.post("/tokens", who="bob", json={"name": "hour", "expires_in": 3600})
    headers = {"Authorization": f"Bearer {made.json()['secret']}"}
    assert lab.client.get(f"{API}/users/me", headers=headers).status_code == 200
    lab.clock.advance(3601)
    assert lab.client.get(f"{API}/users/me", headers=headers).status_code == 401


def test_set_token_may_only_read(lab: Lab) -> None:
    job_id = submit(lab)
    with transaction(lab.engine) as repo:
        set_id = repo.jobs.load_job(job_id).sets[0].id
        _, secret = repo.tokens.create_token("alice", "set", now=T0, recipe_set=set_id)
    headers = {"Authorization": f"Bearer {secret}"}
    assert lab.client.get(f"{API}/jobs/{job_id}", headers=headers).status_code == 200
    refused: list[tuple[str, object]] = [
        (f"/jobs/{job_id}/cancel", None),
        ("/jobs", {"recipe_sets": []}),
        ("/tokens", {"name": "more"}),
    ]
    for path, body in refused:
        answer = lab.client.post(API + path, json=body, headers=headers)
        assert answer.status_code == 403, path
        assert "set's token" in answer.json()["error"]["message"]
    assert lab.events.names() == ["JobSubmitted"]


def test_secret_shown_once_and_never_listed(lab: Lab) -> None:
    made = lab.post("/tokens", who="alice", json={"name": "ci"}).json()
    assert made["secret"].startswith("lq_")
    listed = lab.get("/tokens", who="alice").json()["tokens"]
    assert {t["name"] for t in listed} == {"test", "ci"}
    assert all("secret" not in t and "digest" not in t for t in listed)
    assert made["secret"] not in lab.get("/tokens", who="alice").text
