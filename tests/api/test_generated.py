"""A generated run over every operation of ``/openapi.json`` (schemathesis), on both databases.

Each operation gets requests generated from its schema, valid and invalid,
sent once without a token and once with an admin's. Every answer must be
documented (status, content type, headers) and none may be a 5xx; valid data
may only be refused for a documented reason (401, 403, 404, 409), and invalid
data must be refused (413 included) (a few operations refuse well-shaped data for reasons no
schema can state, with 422 naming why: their documents say so).
``LABQ_GENERATED_EXAMPLES`` sets the examples per operation and mode (a few
here; ``bench/generated_api.py`` runs many).
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi import checks
from sqlalchemy import create_engine

from labq.config import Settings
from labq.usecases.ports import NoScheduler
from labq.webapp import create_app
from tests.api.conftest import Lab, submit

EXAMPLES = int(os.environ.get("LABQ_GENERATED_EXAMPLES", "4"))


def negative_data_refused(ctx: Any, response: Any, case: Any) -> bool | None:
    """Invalid data is refused: as schemathesis checks it, and a 413 is a refusal too (a
    generated body over ``limits.document_bytes`` is turned away before it is read)."""
    if response.status_code == 413:
        return None
    return checks.negative_data_rejection(ctx, response, case)


CHECKS = [
    not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.positive_data_acceptance,
    negative_data_refused,
]


def document() -> dict[str, Any]:
    """The document every app serves (no database is touched to make it; the settings do not
    change it). Made and read once: each costs about a second, for each of the 330 tests."""
    made: dict[str, Any] = create_app(
        create_engine("sqlite://"), Settings(), NoScheduler()
    ).openapi()
    return made


DOCUMENT = document()
SCHEMA = schemathesis.openapi.from_dict(DOCUMENT)
SCHEMA.location = "/openapi.json"
OPERATIONS = [(method.upper(), path) for path, item in DOCUMENT["paths"].items() for method in item]
# Generous: a correctness test, not a timing one (schemathesis's own default is 10 s).
READ_TIMEOUT = 300.0


def refused_for_meaning() -> set[tuple[str, str]]:
    """Operations whose document says they refuse some well-shaped requests with 422 (a job
    document's meaning, a filter's syntax, a window's order, …): no schema can state why."""
    return {
        (method.upper(), path)
        for path, item in DOCUMENT["paths"].items()
        for method, operation in item.items()
        if "well-shaped but refused" in operation["responses"].get("422", {}).get("description", "")
    }


SEMANTIC_422 = refused_for_meaning()


def run_operation(lab: Lab, method: str, path: str, mode: GenerationMode, examples: int) -> None:
    """Generated requests for one operation, anonymous then as an admin; fails on a bad answer."""
    schema = SCHEMA.clone()  # cheap: the parsed document is shared
    schema.app = lab.client.app  # the requests go to this test's app (as from_asgi sets it)
    operation = schema[path][method]
    chosen = CHECKS
    if (method, path) in SEMANTIC_422:
        chosen = [c for c in CHECKS if c is not checks.positive_data_acceptance]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Any) -> None:
        case.call_and_validate(checks=chosen, timeout=READ_TIMEOUT)
        as_admin = chosen
        if case.meta is not None and case.meta.is_negative_at(ParameterLocation.HEADER):
            # The generated (missing or broken) token is replaced by a good one: valid now.
            as_admin = [c for c in chosen if c is not negative_data_refused]
        case.call_and_validate(headers=lab.auth("root"), checks=as_admin, timeout=READ_TIMEOUT)

    try:
        check()
    except Unsatisfiable:
        # Nothing of the operation can be made invalid (no inputs, or free text only).
        assert mode is GenerationMode.NEGATIVE


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_generated_requests_get_documented_answers(
    any_lab: Lab, method: str, path: str, mode: GenerationMode
) -> None:
    submit(any_lab, "root")  # job 1, set 1, recipe 1 exist for the ids that hit them
    run_operation(any_lab, method, path, mode, EXAMPLES)


def test_the_document_generated_from_is_the_one_a_lab_serves(lab: Lab) -> None:
    assert lab.client.get("/openapi.json").json() == DOCUMENT
