"""Labs, systems, pools, rules, users and groups: everyone reads, only admins change."""

from __future__ import annotations

import pytest

from labq.domain.events import ConditionChanged, SystemAdded
from tests.api.conftest import Lab

# (method, path, body): every change only an admin may make.
ADMIN_ONLY = [
    ("POST", "/labs", {"name": "lab2"}),
    ("POST", "/systems", {"fqdn": "s9.lab", "lab": "lab1"}),
    ("POST", "/systems/s1.lab/condition", {"condition": "broken", "reason": "disk"}),
    ("PATCH", "/systems/s1.lab", {"inventory": {"cpu_flags": ["vmx"]}}),
    ("POST", "/pools", {"name": "gpu"}),
    ("POST", "/pools/perf/systems", {"fqdn": "s2.lab"}),
    ("DELETE", "/pools/perf/systems/s1.lab", None),
    ("PUT", "/pools/perf/rules/kernel-qe", {"max_priority": "high"}),
    ("DELETE", "/pools/perf/rules/kernel-qe", None),
    ("POST", "/users", {"name": "dave"}),
    ("POST", "/groups", {"name": "fs-qe"}),
    ("POST", "/groups/kernel-qe/members", {"user": "bob"}),
    ("DELETE", "/groups/kernel-qe/members/alice", None),
]
READS = ["/labs", "/systems", "/systems/s1.lab", "/systems/s1.lab/history", "/pools"]
READS += ["/users", "/users/me", "/groups", "/tokens", "/queue", "/jobs"]


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_ONLY)
def test_admin_only_refused_for_users(lab: Lab, method: str, path: str, body: object) -> None:
    before = lab.activity()
    answer = lab.client.request(method, "/api/v1" + path, json=body, headers=lab.auth("alice"))
    assert answer.status_code == 403
    assert answer.json()["error"]["message"] == "only admins may do this, and 'alice' is not one"
    assert lab.activity() == before
    assert lab.events.calls == []


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_ONLY)
def test_admin_only_allowed_for_admins(lab: Lab, method: str, path: str, body: object) -> None:
    before = lab.activity()
    answer = lab.client.request(method, "/api/v1" + path, json=body, headers=lab.auth("root"))
    assert answer.status_code in (200, 201), answer.text
    assert lab.activity() == before + 1


@pytest.mark.parametrize("path", READS)
def test_everyone_reads(lab: Lab, path: str) -> None:
    assert lab.get(path, who="bob").status_code == 200


def test_system_add_and_condition_tell_the_scheduler_after_commit(lab: Lab) -> None:
    body = {"fqdn": "s9.lab", "lab": "lab1", "attributes": {"cpus": 8}, "pools": ["perf"]}
    added = lab.post("/systems", json=body)
    assert added.status_code == 201
    assert added.json()["usage"] == "pending"
    changed = lab.post("/systems/s9.lab/condition", json={"condition": "broken", "reason": "fan"})
    assert changed.json()["changed"] is True
    again = lab.post("/systems/s9.lab/condition", json={"condition": "broken"})
    assert again.json()["changed"] is False
    assert lab.events.calls == [
        (SystemAdded("s9.lab"), True),
        (ConditionChanged("s9.lab"), True),
    ]
    shown = lab.get("/systems/s9.lab").json()
    assert shown["condition"] == "broken"
    assert shown["condition_reason"] == "fan"
    history = lab.get("/systems/s9.lab/history").json()["history"]
    assert [h["usage"] for h in history] == ["idle", "pending", "idle"]


def test_an_inventory_is_set_shown_and_tells_the_scheduler(lab: Lab) -> None:
    inventory = {
        "devices": [{"driver": "e1000e", "vendor_id": "8086"}],
        "disks": [{"size": 10**12, "model": "WD"}],
        "last_inventoried": "2026-11-20T10:00:00",
    }
    assert lab.get("/systems/s1.lab").json()["inventory"] == {}
    first = lab.client.patch(
        "/api/v1/systems/s1.lab", json={"inventory": inventory}, headers=lab.auth("root")
    )
    assert first.status_code == 200, first.text
    assert first.json()["changed"] is True
    again = lab.client.patch(
        "/api/v1/systems/s1.lab", json={"inventory": inventory}, headers=lab.auth("root")
    )
    assert again.json()["changed"] is False
    assert lab.events.names() == ["AccessChanged"]  # once: the second changed nothing
    shown = lab.get("/systems/s1.lab").json()["inventory"]
    assert shown == {**inventory, "last_inventoried": "2026-11-20T10:00:00Z"}


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"inventory": {"disks": [{"size": "big"}]}}, 422, "inventory.disks.0.size"),
        ({"inventory": {"disks": [{"model": "x"}]}}, 422, "inventory.disks.0.size"),
        ({"inventory": {"gpus": []}}, 422, "unknown field 'inventory.gpus'"),
        ({"inventory": {"devices": [{"colour": "red"}]}}, 422, "inventory.devices.0.colour"),
        ({"inventory": {"last_inventoried": "yesterday"}}, 422, "expected an ISO date-time"),
        ({"inventory": []}, 422, "inventory"),
        ({"colour": "red"}, 422, "colour"),
    ],
)
def test_a_bad_inventory_is_refused_and_nothing_changes(lab: Lab, body, status, words) -> None:
    before = lab.activity()
    answer = lab.client.patch("/api/v1/systems/s1.lab", json=body, headers=lab.auth("root"))
    assert answer.status_code == status, answer.text
    assert words in answer.text
    assert lab.activity() == before
    assert lab.get("/systems/s1.lab").json()["inventory"] == {}


def test_system_filters(lab: Lab) -> None:
    assert [s["fqdn"] for s in lab.get("/systems", pool="perf").json()["systems"]] == ["s1.lab"]
    assert len(lab.get("/systems", lab="lab1").json()["systems"]) == 2
    missing = lab.get("/systems", lab="nowhere")
    assert missing.status_code == 404
    assert "nowhere" in missing.json()["error"]["message"]
    assert lab.get("/systems/nope.lab").status_code == 404


def test_pool_rules_are_listed_and_tell_access_changed(lab: Lab) -> None:
    lab.client.put(
        "/api/v1/pools/perf/rules/kernel-qe",
        json={"max_priority": "high"},
        headers=lab.auth("root"),
    )
    pools = lab.get("/pools").json()["pools"]
    assert pools == [
        {"name": "perf", "systems": ["s1.lab"], "restricted": True, "rules": {"kernel-qe": "high"}}
    ]
    assert lab.events.names() == ["AccessChanged"]


def test_duplicates_are_409(lab: Lab) -> None:
    for path, body in [("/labs", {"name": "lab1"}), ("/users", {"name": "bob"})]:
        answer = lab.post(path, json=body)
        assert answer.status_code == 409
        assert "already exists" in answer.json()["error"]["message"]


def test_groups_and_members(lab: Lab) -> None:
    assert lab.post("/groups/kernel-qe/members", json={"user": "bob"}).json()["changed"]
    groups = {g["name"]: g["members"] for g in lab.get("/groups").json()["groups"]}
    assert groups["kernel-qe"] == ["alice", "bob", "carol"]
    assert lab.get("/users/me", who="bob").json()["groups"] == ["kernel-qe"]


def test_tokens_of_others_need_admin(lab: Lab) -> None:
    assert lab.get("/tokens", who="bob", user="alice").status_code == 403
    assert lab.post("/tokens", who="bob", json={"name": "x", "user": "alice"}).status_code == 403
    alice_tokens = lab.get("/tokens", who="root", user="alice").json()["tokens"]
    token_id = alice_tokens[0]["id"]
    refused = lab.client.delete(f"/api/v1/tokens/{token_id}", headers=lab.auth("bob"))
    assert refused.status_code == 403
    made = lab.post("/tokens", who="root", json={"name": "for-bob", "user": "bob"})
    assert made.status_code == 201
    assert made.json()["user"] == "bob"
    revoked = lab.client.delete(f"/api/v1/tokens/{token_id}", headers=lab.auth("root"))
    assert revoked.json() == {"id": token_id, "revoked": True, "changed": True}
    assert lab.get("/users/me", who="alice").status_code == 401
