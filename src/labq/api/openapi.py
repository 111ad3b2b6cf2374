"""The errors each operation answers, as ``/openapi.json`` lists them.

Most come from what a route depends on, so they are derived here once: every
request may be refused by the guard (400 for a NUL in the URL, 413 for a body
over the limit) and by :func:`~labq.gateway.deps.strict_query` (422 for an unknown
query parameter); a token makes 401 possible, an admin or a write 403 (a recipe
set's token may not write). What a handler refuses itself (404, 409, …) it
declares with :func:`answers`.
"""

from __future__ import annotations

from typing import Any, Final

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute

from labq.gateway.auth import READ_METHODS
from labq.gateway.deps import admin, credential, dependants
from labq.gateway.schemas import NUL_FREE

PREFIX: Final = "/api/v1"  # the routers' (labq.api.app includes them under it)

WHEN: Final[dict[int, str]] = {
    400: "the body is not valid JSON, or the URL holds a NUL character",
    401: "no valid token",
    403: "not allowed for this caller",
    404: "no such thing",
    409: "it exists already, or the state changed under the request",
    413: (
        "the body is over limits.document_bytes, whatever it holds (an array past its"
        " maxItems usually is: it is refused so before it is read)"
    ),
    415: "the job document's Content-Type names no format",
    422: (
        "a parameter or the body is invalid (the answer names the place); also a well-shaped"
        " one whose meaning is refused, where the operation says so"
    ),
    503: "the database does not answer",
}
# Well-shaped requests these operations still refuse with 422, for a reason no schema states.
MEANING_422: Final[dict[tuple[str, str], str]] = {
    ("post", "/jobs"): "a job document that is not valid in its format (a native one without"
    " recipe_sets, e.g. {}), or that asks for what no system has",
    ("post", "/runs"): "a job of the run whose document is not valid in its format",
    ("post", "/jobs/cancel"): "no job ids and no filter",
    ("post", "/jobs/priority"): "no job ids and no filter",
    ("get", "/usage"): "since not before until, or a window over ten years",
    ("get", "/sim/export"): "since not before until, or a window over ten years",
    ("patch", "/systems/{fqdn}"): "an inventory that does not describe a system",
    ("post", "/locks/acquire"): "a lock level the settings do not know, or no set named",
    ("post", "/locks/release"): "no locks named and not all: true",
    ("post", "/filters"): "a predicate or rate that does not parse",
    ("post", "/queue/pause"): "both until and for_s, or an until not in the future",
    ("post", "/distros/import"): "a .treeinfo that does not describe a tree (the answer names"
    " its section and key), or a url that is neither a URL nor an absolute path",
    ("post", "/distros"): "a name, arch or URL that is not one, or a kernel without an initrd",
    ("post", "/webhooks"): "a URL that is not http(s) with a host, or a user's and a group's",
}
_FASTAPI_422: Final = "Validation Error"
ERROR_SCHEMA: Final = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["status", "message"],
            "properties": {
                "status": {"type": "integer"},
                "message": {"type": "string"},
                "place": {"type": "string"},
                "line": {"type": "integer"},
                "problems": {
                    "type": "array",
                    "description": "each problem of a document that has several",
                    "items": {
                        "type": "object",
                        "required": ["message"],
                        "properties": {
                            "message": {"type": "string"},
                            "place": {"type": "string"},
                            "line": {"type": "integer"},
                        },
                    },
                },
            },
        }
    },
}


def answers(*codes: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for the errors a handler raises itself."""
    return {code: _error(code) for code in codes}


def document_errors(router: APIRouter) -> None:
    """Add to each route of ``router`` the errors its dependencies and parameters give."""
    for route in router.routes:
        if isinstance(route, APIRoute) and route.include_in_schema:
            for code in sorted(_derived(route)):
                route.responses.setdefault(code, _error(code))


def install(app: FastAPI) -> None:
    """Serve the document without FastAPI's own 422 and its schemas (ours replaces it), and
    with every text parameter NUL-free, as the guard has it."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = generate()
            for item in document.get("paths", {}).values():
                for operation in item.values():
                    if operation["responses"].get("422", {}).get("description") == _FASTAPI_422:
                        del operation["responses"]["422"]
                    for parameter in operation.get("parameters", []):
                        _nul_free(parameter.get("schema", {}))
            _state_meaning_refusals(document.get("paths", {}))
            for name in ("HTTPValidationError", "ValidationError"):
                document.get("components", {}).get("schemas", {}).pop(name, None)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _state_meaning_refusals(paths: dict[str, dict[str, Any]]) -> None:
    for (method, path), why in MEANING_422.items():
        operation = paths.get(PREFIX + path, {}).get(method)
        if operation is not None:
            refusal = operation["responses"].setdefault("422", _error(422))
            refusal["description"] = f"{WHEN[422]}; well-shaped but refused: {why}"


def _nul_free(schema: dict[str, Any]) -> None:
    if schema.get("type") == "string" and "pattern" not in schema and "enum" not in schema:
        schema["pattern"] = NUL_FREE
    for option in schema.get("anyOf", []):
        _nul_free(option)


def _derived(route: APIRoute) -> set[int]:
    # The guard's 400 and 413 come before any route; strict_query's 422 on every route.
    codes = {400, 413, 422}
    calls = {d.call for d in dependants(route.dependant)}
    if credential in calls:
        codes.add(401)
        if not (route.methods or set()) <= READ_METHODS:
            codes.add(403)  # a recipe set's token may not write
    if admin in calls:
        codes.add(403)
    return codes


def _error(code: int) -> dict[str, Any]:
    return {
        "description": WHEN[code],
        "content": {"application/json": {"schema": ERROR_SCHEMA}},
    }
