"""``PATCH /systems/{fqdn}`` (lab, arch, attributes, pools), ``POST /systems/{fqdn}/remove``
and ``GET /systems/summary``: admins change, everyone reads, the history keeps it all."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labq.domain.model import System
from labq.domain.states import Condition, Usage
from labq.domain.summary import COLUMNS, column_of, summarise
from tests.api.conftest import Lab

CHANGES = [
    ("PATCH", "/systems/s1.lab", {"arch": "aarch64"}),
    ("PATCH", "/systems/s1.lab", {"attributes": {"memory_mb": 4096}}),
    ("PATCH", "/systems/s2.lab", {"add_pools": ["perf"]}),
    ("POST", "/systems/s2.lab/remove", {"reason": "sold"}),
]


@pytest.mark.parametrize(("method", "path", "body"), CHANGES)
def test_only_admins_edit_and_remove(lab: Lab, method: str, path: str, body: object) -> None:
    before = lab.activity()
    refused = lab.client.request(method, "/api/v1" + path, json=body, headers=lab.auth("alice"))
    assert refused.status_code == 403
    assert lab.activity() == before
    allowed = lab.client.request(method, "/api/v1" + path, json=body, headers=lab.auth("root"))
    assert allowed.status_code == 200, allowed.text
    assert allowed.json()["changed"] is True
    assert lab.activity() > before


def test_edit_merges_attributes_moves_pools_and_labs_and_keeps_history(lab: Lab) -> None:
    lab.post("/labs", json={"name": "lab2"})
    lab.events.calls.clear()
    body = {
        "lab": "lab2",
        "arch": "ppc64le",
        "attributes": {"memory_mb": None, "cpus": 16, "vendor": "ibm"},
        "remove_pools": ["perf"],
    }
    changed = lab.client.patch("/api/v1/systems/s1.lab", json=body, headers=lab.auth("root"))
    assert changed.status_code == 200, changed.text
    shown = changed.json()
    assert shown["fields"] == ["lab", "arch", "attributes", "pools"]
    assert (shown["lab"], shown["arch"], shown["pools"]) == ("lab2", "ppc64le", [])
    assert shown["attributes"] == {"cpus": 16, "vendor": "ibm"}
    assert lab.events.names() == ["AccessChanged"]  # the scheduler rebuilds what it knows
    again = lab.client.patch("/api/v1/systems/s1.lab", json=body, headers=lab.auth("root"))
    assert again.json()["changed"] is False
    assert lab.events.names() == ["AccessChanged"]
    changes = lab.get("/systems/s1.lab/history").json()["changes"]
    actions = [(c["action"], c["old"], c["new"]) for c in changes]
    assert ("lab", "lab1", "lab2") in actions
    assert ("arch", "x86_64", "ppc64le") in actions
    assert ("remove from pool", "perf", None) in actions
    assert all(c["actor"] == "root" for c in changes[1:])


@pytest.mark.parametrize(
    ("body", "place"),
    [
        ({}, None),
        ({"lab": "nolab"}, None),
        ({"add_pools": ["nopool"]}, None),
        ({"attributes": {"": 1}}, "attributes"),
        ({"arch": 3}, "arch"),
    ],
)
def test_bad_edits_are_refused_in_one_line(lab: Lab, body: object, place: str | None) -> None:
    before = lab.activity()
    answer = lab.client.patch("/api/v1/systems/s1.lab", json=body, headers=lab.auth("root"))
    assert answer.status_code in (404, 422)
    error = answer.json()["error"]
    assert "\n" not in error["message"]
    if place is not None:
        assert place in error.get("place", "")
    assert lab.activity() == before
    assert lab.events.calls == []


def test_remove_marks_removed_keeps_history_and_summary_leaves_it_out(lab: Lab) -> None:
    summary = lab.get("/systems/summary", who="bob").json()
    (lab1,) = summary["labs"]
    assert (lab1["lab"], lab1["total"], lab1["idle"]) == ("lab1", 2, 2)
    assert [p["pool"] for p in lab1["pools"]] == ["perf", None]
    removed = lab.post("/systems/s2.lab/remove", json={"reason": "sold"})
    assert removed.json() == {
        "fqdn": "s2.lab",
        "changed": True,
        "condition": "removed",
        "recipe": None,
        "aborted_set": None,
    }
    assert lab.events.names() == ["ConditionChanged"]
    assert lab.post("/systems/s2.lab/remove").json()["changed"] is False
    history = lab.get("/systems/s2.lab/history").json()
    assert history["history"][-1]["condition"] == "removed"
    assert history["changes"][-1]["reason"] == "sold"
    (lab1,) = lab.get("/systems/summary").json()["labs"]
    assert (lab1["total"], lab1["idle"]) == (1, 1)
    assert lab.post("/systems/nope.lab/remove").status_code == 404
    assert lab.get("/systems/summary", lab="nolab").status_code == 404


_SYSTEMS = st.builds(
    System,
    fqdn=st.text("abc", min_size=1, max_size=3),
    lab=st.sampled_from(["l1", "l2"]),
    pools=st.frozensets(st.sampled_from(["p", "q"])),
    condition=st.sampled_from(list(Condition)),
    usage=st.sampled_from(list(Usage)),
)


@given(st.lists(_SYSTEMS, max_size=20), st.frozensets(st.text("abc", min_size=1, max_size=3)))
def test_every_present_system_counts_once_per_row(
    systems: list[System], reserved: frozenset[str]
) -> None:
    rows = summarise(systems, reserved)
    present = [s for s in systems if s.condition is not Condition.REMOVED]
    assert sum(int(str(r["total"])) for r in rows) == len(present)
    for row in rows:
        assert sum(int(str(row[c])) for c in COLUMNS) == row["total"]
        members = [s for s in present if s.lab == row["lab"]]
        for pool in row["pools"]:  # type: ignore[attr-defined]
            inside = [s for s in members if (pool["pool"] in s.pools) or (
                pool["pool"] is None and not s.pools)]  # fmt: skip
            assert pool["total"] == len(inside)
            for column in COLUMNS:
                assert pool[column] == sum(column_of(s, reserved) == column for s in inside)


def test_a_busy_system_counts_by_its_usage_whatever_its_condition() -> None:
    busy = System("b", "l", condition=Condition.BROKEN, usage=Usage.RUNNING, recipe=1)
    held = System("h", "l", condition=Condition.MANUAL, usage=Usage.SCHEDULED, recipe=2)
    free = System("f", "l", condition=Condition.MANUAL)
    assert [column_of(s) for s in (busy, held, free)] == ["running", "held", "manual"]
    # a reserved system counts as reserved unless a recipe has it
    assert [column_of(s, frozenset({"b", "f"})) for s in (busy, free)] == ["running", "reserved"]
