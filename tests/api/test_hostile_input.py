"""Input built to break the server gets a 4xx naming the place, on SQLite and PostgreSQL.

Each case here was a 500 once: an id past the column's range, a document with a
NUL, C1 controls, 30,000 levels of nesting or a 5,000-digit number, a log path
no file system holds.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labq.store import transaction
from tests.api.conftest import API, Lab, submit

HUGE = [2**31, 2**63]
# (method, url with {n}, JSON body, the place the answer must name)
ID_ROUTES: list[tuple[str, str, dict[str, Any] | None, str]] = [
    ("GET", "/jobs/{n}", None, "job_id"),
    ("GET", "/jobs/{n}/history", None, "job_id"),
    ("GET", "/jobs/{n}/results", None, "job_id"),
    ("GET", "/jobs/{n}/logs", None, "job_id"),
    ("GET", "/jobs/{n}/logs/file?path=x", None, "job_id"),
    ("POST", "/jobs/{n}/cancel", None, "job_id"),
    ("POST", "/jobs/{n}/priority", {"priority": "low"}, "job_id"),
    ("DELETE", "/filters/{n}", None, "filter_id"),
    ("DELETE", "/tokens/{n}", None, "token_id"),
    ("POST", "/locks/release", {"all": True}, "set"),
    ("POST", "/locks/acquire", {"locks": [{"level": "system", "name": "s"}]}, "set"),
    ("GET", "/jobs?offset={n}", None, "offset"),
]
TASK = {"name": "t", "run": "true"}


def _send(lab: Lab, method: str, url: str, **kw: Any) -> Any:
    return lab.client.request(method, API + url, headers=lab.auth("root"), **kw)


def _post_job(lab: Lab, text: str | bytes, media: str = "application/yaml") -> Any:
    headers = {**lab.auth("root"), "Content-Type": media}
    return lab.client.post(f"{API}/jobs", content=text, headers=headers)


def _json_job(**fields: Any) -> str:
    job = {"recipe_sets": [{"recipes": [{"tasks": [TASK]}]}], **fields}
    return json.dumps(job, ensure_ascii=False)


def _refused(answer: Any, status: int, *words: str) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    error: dict[str, Any] = answer.json()["error"]
    for word in words:
        assert word in error["message"]
    return error


@pytest.mark.parametrize("n", HUGE)
@pytest.mark.parametrize(("method", "url", "body", "place"), ID_ROUTES, ids=lambda v: str(v))
def test_an_id_past_the_column_is_422_naming_it(
    any_lab: Lab, method: str, url: str, body: dict[str, Any] | None, place: str, n: int
) -> None:
    submit(any_lab, "root")
    before = any_lab.activity()
    sent = None if body is None else {**body, "set": n}
    answer = _send(any_lab, method, url.format(n=n), json=sent)
    error = _refused(answer, 422, place, "2147483647")
    assert error["place"] == place
    assert any_lab.activity() == before


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ('recipe_sets:\n  - recipes: [{tasks: [{name: t, run: "a\x00"}]}]\n', 2, ["U+0000"]),
        ('recipe_sets:\n  - recipes: [{tasks: [{name: t, run: "a\\0"}]}]\n', 2, ["NUL"]),
        ("recipe_sets: " + "[" * 30_000 + "]" * 30_000 + "\n", 1, ["limits.depth", "64"]),
        ("recipe_sets: []\nmetadata: {n: " + "9" * 5000 + "}\n", 2, ["5000 digits"]),
        ("recipe_sets: []\nmetadata: {n: 9223372036854775808}\n", 2, ["64-bit"]),
        ("recipe_sets: []\nmetadata: {n: .nan}\n", 2, ["finite"]),
    ],
    ids=["nul", "escaped-nul", "deep", "digits", "past-int64", "nan"],
)
def test_hostile_yaml_is_422_with_its_line(
    any_lab: Lab, text: str, line: int, words: list[str]
) -> None:
    error = _refused(_post_job(any_lab, text), 422, *words)
    assert error["line"] == line
    assert any_lab.get("/jobs").json()["total"] == 0


@pytest.mark.parametrize(
    ("text", "words", "place"),
    [
        (_json_job(whiteboard="a\x00b"), ["NUL"], "whiteboard"),
        ('{"recipe_sets": ' + "[" * 30_000 + "]" * 30_000 + "}", ["limits.depth"], None),
        ('{"recipe_sets": [], "metadata": {"n": ' + "9" * 5000 + "}}", ["5000 digits"], None),
        ('{"recipe_sets": [], "metadata": {"n": NaN}}', ["finite"], "metadata.n"),
        ('{"recipe_sets": [], "metadata": {"n": 1e999}}', ["finite"], "metadata.n"),
    ],
    ids=["nul", "deep", "digits", "nan", "infinity"],
)
def test_hostile_json_is_422_naming_the_place(
    any_lab: Lab, text: str, words: list[str], place: str | None
) -> None:
    error = _refused(_post_job(any_lab, text, "application/json"), 422, *words)
    assert error["line"] == 1
    if place is not None:
        assert error["place"] == place
    assert any_lab.get("/jobs").json()["total"] == 0


@pytest.mark.parametrize("code", range(0x7F, 0xA0))
def test_json_with_c1_controls_is_a_job(any_lab: Lab, code: int) -> None:
    """Valid JSON that YAML cannot re-read (for line numbers) is still a job."""
    answer = _post_job(any_lab, _json_job(whiteboard=f"a{chr(code)}b"), "application/json")
    assert answer.status_code == 201, answer.text
    assert any_lab.get(f"/jobs/{answer.json()['id']}").json()["whiteboard"] == f"a{chr(code)}b"


@pytest.mark.parametrize("field", ["timeout", "max_time"])
def test_seconds_past_ten_years_are_422(any_lab: Lab, field: str) -> None:
    task = {**TASK, "timeout": 2**31} if field == "timeout" else TASK
    rset: dict[str, Any] = {"recipes": [{"tasks": [task]}]}
    if field == "max_time":
        rset["max_time"] = 2**31
    answer = _post_job(any_lab, json.dumps({"recipe_sets": [rset]}), "application/json")
    assert _refused(answer, 422, "315360000")["place"].endswith(field)


@pytest.mark.parametrize(
    ("method", "url", "body", "place"),
    [
        ("POST", "/labs", {"name": "a\x00b"}, "name"),
        (
            "POST",
            "/systems",
            {"fqdn": "s9", "lab": "lab1", "attributes": {"k": "\x00"}},
            "attributes",
        ),
        ("POST", "/filters", {"action": "accept", "predicates": ["owner=\x00"]}, "predicates"),
        ("POST", "/filters", {"action": "rate-limit", "rate": 2**31}, "rate"),
    ],
    ids=["name", "attribute", "predicate", "rate"],
)
def test_body_values_no_database_stores_are_422(
    any_lab: Lab, method: str, url: str, body: dict[str, Any], place: str
) -> None:
    before = any_lab.activity()
    error = _refused(_send(any_lab, method, url, json=body), 422)
    assert error["place"].startswith(place)
    assert any_lab.activity() == before


@pytest.mark.parametrize(
    ("url", "place"),
    [
        ("/systems/s1%00.lab", "path"),
        ("/jobs?owner=a%00b", "owner"),
        ("/jobs/1/logs/file?path=logs%00/x", "path"),
    ],
)
def test_a_nul_in_the_url_is_400_naming_where(any_lab: Lab, url: str, place: str) -> None:
    submit(any_lab)
    error = _refused(_send(any_lab, "GET", url), 400, "NUL")
    assert error["place"] == place


def test_log_path_too_long_for_the_file_system_is_refused(any_lab: Lab) -> None:
    job = submit(any_lab)
    folder = any_lab.data_dir / "logs" / "set-1"
    folder.mkdir(parents=True)
    with transaction(any_lab.engine) as repo:
        repo.reports.set_log_dir(repo.jobs.load_job(job).sets[0].recipes[0].id, str(folder))
    long_name = _refused(any_lab.get(f"/jobs/{job}/logs/file", path="logs/set-1/" + "a" * 300), 422)
    assert long_name["place"] == "path"
    assert "255 bytes" in long_name["message"]
    deep = "logs/set-1/" + "/".join(["d" * 200] * 21)  # each part fits; the whole does not
    assert any_lab.get(f"/jobs/{job}/logs/file", path=deep).status_code == 422
    # under PATH_MAX itself, past it once joined to the data directory: no such file
    joined = "logs/set-1/" + "/".join(["d" * 200] * 20)
    assert any_lab.get(f"/jobs/{job}/logs/file", path=joined).status_code == 404


def test_405_names_every_method_the_path_answers(lab: Lab) -> None:
    answer = _send(lab, "PUT", "/jobs")
    assert answer.status_code == 405
    assert answer.headers["allow"] == "GET, POST"
    assert answer.json()["error"]["message"] == (
        "PUT is not allowed on /api/v1/jobs; it answers GET, POST"
    )
    assert _send(lab, "PATCH", "/jobs/1").headers["allow"] == "GET"


def test_a_literal_path_answers_only_its_methods_though_a_parameter_would_match_it(
    lab: Lab,
) -> None:
    """GET /jobs/cancel is not GET /jobs/{job_id}; PATCH /systems/summary no system's PATCH."""
    for method, url, allowed in (
        ("GET", "/jobs/cancel", "POST"),
        ("OPTIONS", "/jobs/priority", "POST"),
        ("PATCH", "/systems/summary", "GET"),
    ):
        answer = lab.client.request(method, API + url)  # no token: 405 comes first
        assert answer.status_code == 405, (method, url)
        assert answer.headers["allow"] == allowed
        assert answer.json()["error"]["message"] == (
            f"{method} is not allowed on /api/v1{url}; it answers {allowed}"
        )
    job = submit(lab)
    assert _send(lab, "GET", f"/jobs/{job}").status_code == 200  # the parameter's own paths
    assert _send(lab, "GET", "/jobs/abc").status_code == 422


def test_every_path_refuses_the_methods_its_document_does_not_list(lab: Lab) -> None:
    paths: dict[str, dict[str, Any]] = lab.client.get("/openapi.json").json()["paths"]
    for path, item in paths.items():
        listed = [m for m in ("GET", "POST", "PUT", "PATCH", "DELETE") if m.lower() in item]
        url = re.sub(r"\{[^}]*\}", "1", path)
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"):
            if method not in listed:
                answer = lab.client.request(method, url, headers=lab.auth("root"))
                assert answer.status_code == 405, (method, path)
                assert answer.headers["allow"] == ", ".join(listed), (method, path)


def test_a_time_in_a_query_is_iso_8601_not_a_number(lab: Lab) -> None:
    for value in ("-1.3e-182", "1700000000", "nan"):
        refused = _refused(lab.get("/usage", until=value), 422)
        assert refused["place"] == "until"
        assert "ISO 8601" in refused["message"]
    assert lab.get("/usage", until="2026-11-24T00:00:00Z").status_code == 200


@pytest.mark.parametrize(("value", "status"), [(3600.0, 201), (3600.5, 422), (True, 422)])
def test_an_integral_float_is_an_integer_as_the_schema_says(
    lab: Lab, value: object, status: int
) -> None:
    answer = _send(lab, "POST", "/tokens", json={"name": "ci", "expires_in": value})
    assert answer.status_code == status, answer.text


TEUTHOLOGY = {"roles": [["client.0"]], "tasks": [{"install": None}]}


def _post_teuthology(lab: Lab, text: str) -> Any:
    headers = {**lab.auth("root"), "Content-Type": "application/yaml"}
    return lab.client.post(f"{API}/jobs?format=teuthology", content=text, headers=headers)


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({**TEUTHOLOGY, "description": "a \U0001f600 b"}),  # ASCII: \ud83d\ude00
        'roles: [[client.0]]\ntasks: [{install: }]\ndescription: "a \\ud83d\\ude00 b"\n',
        'roles: [[client.0]]\ntasks: [{install: }]\ndescription: "a \\uD83D\\uDE00 b"\n',
    ],
    ids=["json", "yaml", "yaml-upper"],
)
def test_a_surrogate_pair_escape_is_the_character_it_encodes(any_lab: Lab, text: str) -> None:
    answer = _post_teuthology(any_lab, text)
    assert answer.status_code == 201, answer.text
    assert any_lab.get(f"/jobs/{answer.json()['id']}").json()["whiteboard"] == "a \U0001f600 b"


def test_a_surrogate_escape_outside_double_quotes_is_kept_as_written(any_lab: Lab) -> None:
    """In plain and single-quoted YAML a backslash is itself: nothing is joined there."""
    text = (
        "roles: [[client.0]]\ntasks: [{install: }]\n"
        "description: 'a \\ud83d\\ude00'\nname: \\ud83d\\ude00 \"\\ud83d\"\n"
    )
    answer = _post_teuthology(any_lab, text)
    assert answer.status_code == 201, answer.text
    job = any_lab.get(f"/jobs/{answer.json()['id']}").json()
    assert job["whiteboard"] == "a \\ud83d\\ude00"
    assert job["metadata"]["name"] == '\\ud83d\\ude00 "\\ud83d"'


# a character no database stores: NUL, or half of a UTF-16 pair without its other half
UNSTORABLE = st.sampled_from(["\x00", "\ud800", "\udbff", "\udc00", "\udfff"])


# A document holding both a surrogate escape and a character of U+E800-U+EFFF (the
# escapes' stand-ins) is refused as a whole, by line (tests/unit/test_yamltree.py): no fill
# from that range, or the refusal would name no place.
_STAND_INS = "".join(chr(code) for code in range(0xE800, 0xF000))


def _hostile(text: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    chars = st.characters(codec="utf-8", exclude_characters="\x00" + _STAND_INS)
    fill = st.text(chars, max_size=5)
    return st.builds(lambda a, bad, b: a + bad + b, fill, text, fill)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    key=_hostile(UNSTORABLE),
    where=st.sampled_from(["key", "value"]),
    fmt=st.sampled_from(["teuthology", "native"]),
)
def test_unstorable_text_anywhere_is_422_naming_the_place(
    any_lab: Lab, key: str, where: str, fmt: str
) -> None:
    """Hypothesis puts a NUL or a lone surrogate (as a JSON escape) in a nested key or value."""
    inner = {key: "x"} if where == "key" else {"k": key}
    if fmt == "teuthology":
        job: dict[str, Any] = {**TEUTHOLOGY, "overrides": {"ceph": {"conf": inner}}}
        place = "overrides.ceph.conf" + ("" if where == "key" else ".k")
        answer = _post_teuthology(any_lab, json.dumps(job))
    else:
        job = json.loads(_json_job(metadata={"a": [inner]}))
        place = "metadata.a[0]" + ("" if where == "key" else ".k")
        answer = _post_job(any_lab, json.dumps(job), "application/json")
    error = _refused(answer, 422)
    assert error.get("place") == place, error
    assert "NUL" in error["message"] or "lone surrogate" in error["message"]
    assert error.get("line") == 1, error
    assert any_lab.get("/jobs").json()["total"] == 0


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1))
def test_any_storable_text_round_trips_through_a_teuthology_job(any_lab: Lab, text: str) -> None:
    """What can be stored is stored as sent, whether written as escapes or as itself."""
    job = {**TEUTHOLOGY, "description": text, "overrides": {"ceph": {text: text}}}
    for ascii_only in (True, False):
        answer = _post_teuthology(any_lab, json.dumps(job, ensure_ascii=ascii_only))
        if answer.status_code != 201:  # e.g. C1 controls: YAML refuses them, with the place
            assert answer.status_code == 422, answer.text
            assert answer.json()["error"]["line"] is not None
            continue
        stored = any_lab.get(f"/jobs/{answer.json()['id']}").json()
        assert stored["whiteboard"] == text
