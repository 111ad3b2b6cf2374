"""Bad input on every endpoint that takes a body: a clear 4xx, and nothing stored."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api.conftest import API, MAX_BODY, Lab, submit

# (method, path, a good body, a field and a value of the wrong type for it)
BODIES: list[tuple[str, str, dict[str, Any], str, Any]] = [
    ("POST", "/labs", {"name": "lab2"}, "name", 5),
    ("POST", "/systems", {"fqdn": "s9.lab", "lab": "lab1"}, "attributes", ["cpus"]),
    ("POST", "/systems/s1.lab/condition", {"condition": "broken"}, "condition", True),
    ("POST", "/pools", {"name": "gpu"}, "name", None),
    ("POST", "/pools/perf/systems", {"fqdn": "s2.lab"}, "fqdn", {"a": 1}),
    ("PUT", "/pools/perf/rules/kernel-qe", {"max_priority": "low"}, "max_priority", 3),
    ("POST", "/users", {"name": "dave"}, "admin", "yes"),
    ("POST", "/groups", {"name": "fs-qe"}, "name", 1.5),
    ("POST", "/groups/kernel-qe/members", {"user": "bob"}, "user", ["bob"]),
    ("POST", "/tokens", {"name": "ci"}, "expires_in", "3600"),
    ("POST", "/jobs/1/cancel", {"reason": "no"}, "reason", 7),
    ("POST", "/jobs/1/priority", {"priority": "low"}, "priority", 0),
]
IDS = [f"{m} {p}" for m, p, *_ in BODIES]


@pytest.fixture
def ready(lab: Lab) -> Lab:
    submit(lab, "root")
    lab.events.calls.clear()
    return lab


def _send(lab: Lab, method: str, path: str, **kw: Any) -> Any:
    return lab.client.request(method, API + path, headers=lab.auth("root"), **kw)


def _unchanged(lab: Lab, before: int) -> None:
    assert lab.activity() == before
    assert lab.events.calls == []
    assert lab.get("/jobs/1").json()["state"] == "new"


@pytest.mark.parametrize(("method", "path", "good", "field", "wrong"), BODIES, ids=IDS)
def test_malformed_json_is_400(
    ready: Lab, method: str, path: str, good: dict[str, Any], field: str, wrong: Any
) -> None:
    before = ready.activity()
    broken = json.dumps(good)[:-1]
    answer = ready.client.request(
        method,
        API + path,
        content=broken,
        headers={**ready.auth("root"), "Content-Type": "application/json"},
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["message"].startswith("the body is not valid JSON")
    _unchanged(ready, before)


@pytest.mark.parametrize(("method", "path", "good", "field", "wrong"), BODIES, ids=IDS)
def test_unknown_field_is_422(
    ready: Lab, method: str, path: str, good: dict[str, Any], field: str, wrong: Any
) -> None:
    before = ready.activity()
    answer = _send(ready, method, path, json={**good, "colour": "red"})
    assert answer.status_code == 422
    assert answer.json()["error"] == {
        "status": 422,
        "message": "unknown field 'colour'",
        "place": "colour",
    }
    _unchanged(ready, before)


@pytest.mark.parametrize(("method", "path", "good", "field", "wrong"), BODIES, ids=IDS)
def test_wrong_type_is_422_naming_the_field(
    ready: Lab, method: str, path: str, good: dict[str, Any], field: str, wrong: Any
) -> None:
    before = ready.activity()
    answer = _send(ready, method, path, json={**good, field: wrong})
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["place"].split(".")[0] == field
    assert field in error["message"]
    _unchanged(ready, before)


@pytest.mark.parametrize(("method", "path", "good", "field", "wrong"), BODIES, ids=IDS)
def test_oversized_body_is_413(
    ready: Lab, method: str, path: str, good: dict[str, Any], field: str, wrong: Any
) -> None:
    before = ready.activity()
    huge = json.dumps({**good, "padding": "x" * MAX_BODY}).encode()
    answer = ready.client.request(
        method,
        API + path,
        content=huge,
        headers={**ready.auth("root"), "Content-Type": "application/json"},
    )
    assert answer.status_code == 413
    assert answer.json() == {
        "error": {
            "status": 413,
            "message": f"the body is larger than {MAX_BODY} bytes (limits.document_bytes)",
        }
    }
    _unchanged(ready, before)


def test_streamed_oversized_body_is_413_without_content_length(ready: Lab) -> None:
    before = ready.activity()
    sent = []

    def chunks() -> Any:
        for _ in range(1000):  # far more than the limit: the guard stops reading early
            sent.append(1)
            yield b"x" * 1024

    answer = ready.client.post(
        f"{API}/jobs",
        content=chunks(),
        headers={**ready.auth("root"), "Content-Type": "application/yaml"},
    )
    assert answer.status_code == 413
    assert "Content-Length" not in answer.request.headers
    _unchanged(ready, before)


def test_missing_required_field_and_empty_body(ready: Lab) -> None:
    answer = _send(ready, "POST", "/systems", json={"fqdn": "s9.lab"})
    assert answer.status_code == 422
    assert answer.json()["error"]["message"] == "'lab' is required"
    empty = _send(ready, "POST", "/labs")
    assert empty.status_code == 422
    assert empty.json()["error"]["message"] == "a JSON body is required"
    listed = _send(ready, "POST", "/labs", json=["lab2"])
    assert listed.json()["error"]["message"] == "the body must be a JSON object"


@pytest.mark.parametrize(
    ("text", "media", "line", "place"),
    [
        (
            "whiteboard: x\nrecipe_sets:\n  - priority: hihg\n    recipes: [{}]\n",
            "application/yaml",
            3,
            "recipe_sets[0].priority",
        ),
        ("whiteboard: x\nrecipe_sets: [\n", "application/yaml", None, None),
        (
            '{"recipe_sets": [{"recipes": [{"tasks": [{"nme": "t"}]}]}]}',
            "application/json",
            1,
            None,
        ),
        ("<job><recipeSet><recipe></recipeSet></job>", "application/xml", 1, None),
    ],
    ids=["yaml-bad-priority", "yaml-broken", "json-unknown-key", "xml-broken"],
)
def test_bad_job_document_is_422_with_line_and_place(
    ready: Lab, text: str, media: str, line: int | None, place: str | None
) -> None:
    before = ready.activity()
    answer = ready.client.post(
        f"{API}/jobs", content=text, headers={**ready.auth("root"), "Content-Type": media}
    )
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["message"].startswith("job")
    if line is not None:
        assert error["line"] == line
    if place is not None:
        assert error["place"] == place
    _unchanged(ready, before)
    assert ready.get("/jobs").json()["total"] == 1


def test_job_document_not_utf8_is_422(ready: Lab) -> None:
    answer = ready.client.post(
        f"{API}/jobs",
        content=b"\xff\xfe\x00bad",
        headers={**ready.auth("root"), "Content-Type": "application/yaml"},
    )
    assert answer.status_code == 422
    assert "not UTF-8" in answer.json()["error"]["message"]


def test_a_document_with_several_problems_answers_each_with_its_line(lab: Lab) -> None:
    document = b"recipe_sets:\n  - priority: hihg\n    max_retries: many\n    recipes: [{}]\n"
    answer = lab.client.post(
        f"{API}/jobs",
        content=document,
        headers={**lab.auth("alice"), "Content-Type": "application/yaml"},
    )
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["message"].startswith("job:2: recipe_sets[0].priority: unknown priority 'hihg'")
    assert error["message"].endswith("(and 1 more problem)")  # one line still tells the first
    assert [(p["line"], p["place"]) for p in error["problems"]] == [
        (2, "recipe_sets[0].priority"),
        (3, "recipe_sets[0].max_retries"),
    ]
    assert error["problems"][1]["message"].startswith("job:3: recipe_sets[0].max_retries: ")
    assert "more problem" not in json.dumps(error["problems"])
