"""A generated run over every operation of ``/openapi.json`` (schemathesis), on both databases.

Each operation gets requests generated from its schema, valid and invalid,
sent once without a token and once with an admin's. Every answer must be
documented (status, content type, headers) and none may be a 5xx; valid data
may only be refused for a documented reason (401, 403, 404, 409), and invalid
data must be refused (413 included) (a few operations refuse well-shaped data for reasons no
schema can state, with 422 naming why: those are listed).
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

from labq.api.app import create_app
from labq.config import Settings
from tests.api.conftest import Lab, submit

EXAMPLES = int(os.environ.get("LABQ_GENERATED_EXAMPLES", "6"))


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

# Well-shaped but refused with 422 for a reason beyond JSON Schema: a job document's (or a
# run's) meaning, a lock level from the settings, a filter predicate's syntax, "until or for_s",
# an inventory's time of last inventory (ISO 8601), a usage window's since before its until,
# a bulk change naming no job and no filter, a webhook URL that is not http(s) with a host.
SEMANTIC_422 = {
    ("POST", "/api/v1/webhooks"),
    ("POST", "/api/v1/jobs/cancel"),
    ("POST", "/api/v1/jobs/priority"),
    ("GET", "/api/v1/usage"),
    ("GET", "/api/v1/sim/export"),
    ("PATCH", "/api/v1/systems/{fqdn}"),
    ("POST", "/api/v1/jobs"),
    ("POST", "/api/v1/runs"),
    ("POST", "/api/v1/locks/acquire"),
    ("POST", "/api/v1/locks/release"),
    ("POST", "/api/v1/filters"),
    ("POST", "/api/v1/queue/pause"),
}


def operations() -> list[tuple[str, str]]:
    """Every (method, path) the document lists; no database is touched to list them."""
    app = create_app(create_engine("sqlite://"), Settings(), None)  # type: ignore[arg-type]
    paths: dict[str, dict[str, Any]] = app.openapi()["paths"]
    return [(method.upper(), path) for path, item in paths.items() for method in item]


OPERATIONS = operations()


def run_operation(lab: Lab, method: str, path: str, mode: GenerationMode, examples: int) -> None:
    """Generated requests for one operation, anonymous then as an admin; fails on a bad answer."""
    operation = schemathesis.openapi.from_asgi("/openapi.json", lab.client.app)[path][method]
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
        case.call_and_validate(checks=chosen)
        as_admin = chosen
        if case.meta is not None and case.meta.is_negative_at(ParameterLocation.HEADER):
            # The generated (missing or broken) token is replaced by a good one: valid now.
            as_admin = [c for c in chosen if c is not negative_data_refused]
        case.call_and_validate(headers=lab.auth("root"), checks=as_admin)

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
