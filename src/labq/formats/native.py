"""The native job format: YAML or JSON in exactly the shape of JobSpec."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError

from labq.domain.job import JobSpec
from labq.errors import InputError
from labq.formats.limits import Limits, native_lists
from labq.formats.origins import Origins
from labq.formats.source import LineMap, load_json, load_yaml, validation_error


def parse_native(text: str, *, source: str, limits: Limits | None = None) -> JobSpec:
    """Read and validate a native job document (YAML, or JSON when it starts with ``{``)."""
    return read_native(text, source=source, limits=limits)[0]


def read_native(text: str, *, source: str, limits: Limits | None = None) -> tuple[JobSpec, Origins]:
    """``parse_native``, and the lines of the document's places."""
    limits = limits or Limits()
    load = load_json if text.lstrip().startswith("{") else load_yaml
    data, lines = load(text, source=source, max_depth=limits.depth, lists=native_lists(limits))
    return validate_native(data, source=source, lines=lines), Origins(source, lines)


def validate_native(data: object, *, source: str, lines: LineMap | None = None) -> JobSpec:
    """Validate already-parsed native data (the API's JSON body, a scenario's inline job)."""
    if not isinstance(data, Mapping):
        raise InputError("a job must be a mapping with 'recipe_sets'", source=source, line=1)
    try:
        return JobSpec.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, source=source, lines=lines or LineMap()) from None
