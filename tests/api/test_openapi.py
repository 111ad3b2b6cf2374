"""``/openapi.json`` says which errors each operation gives, in the one error shape."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import API, Lab


@pytest.fixture
def document(lab: Lab) -> dict[str, Any]:
    found: dict[str, Any] = lab.client.get("/openapi.json").json()
    return found


@pytest.mark.parametrize(
    ("method", "path", "codes"),
    [
        ("get", "/health", {200, 400, 413, 422, 503}),
        ("get", "/labs", {200, 400, 401, 413, 422}),
        ("post", "/labs", {201, 400, 401, 403, 409, 413, 422}),
        ("get", "/jobs/{job_id}", {200, 400, 401, 404, 413, 422}),
        ("post", "/jobs", {201, 400, 401, 403, 409, 413, 415, 422}),
        ("post", "/jobs/{job_id}/cancel", {200, 400, 401, 403, 404, 409, 413, 422}),
        ("post", "/locks/acquire", {200, 202, 400, 401, 403, 404, 409, 413, 422}),
        ("delete", "/filters/{filter_id}", {200, 400, 401, 403, 404, 413, 422}),
    ],
)
def test_each_operation_lists_its_errors(
    document: dict[str, Any], method: str, path: str, codes: set[int]
) -> None:
    responses = document["paths"][API + path][method]["responses"]
    assert {int(code) for code in responses} == codes
    for code, answer in responses.items():
        if int(code) >= 400:
            schema = answer["content"]["application/json"]["schema"]
            assert schema["properties"]["error"]["required"] == ["status", "message"]


def test_no_fastapi_validation_schema_is_left(document: dict[str, Any]) -> None:
    assert "HTTPValidationError" not in str(document)
    ids = document["paths"][API + "/jobs/{job_id}"]["get"]["parameters"][0]["schema"]
    assert (ids["minimum"], ids["maximum"]) == (1, 2**31 - 1)
    owner = next(
        p for p in document["paths"][API + "/jobs"]["get"]["parameters"] if p["name"] == "owner"
    )
    assert owner["schema"]["anyOf"][0]["pattern"] == r"^[^\u0000]*$"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("/jobs?colour=red", "unknown query parameter 'colour'"),
        ("/labs?limit=5", "unknown query parameter 'limit'"),
        ("/jobs?owner=alice&owner=bob", "query parameter 'owner' is given more than once"),
    ],
)
def test_unknown_or_repeated_query_parameters_are_422(lab: Lab, url: str, message: str) -> None:
    answer = lab.client.get(API + url, headers=lab.auth("alice"))
    assert answer.status_code == 422
    assert answer.json()["error"]["message"] == message
