"""Choosing a job format and parsing a document with it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final, Literal

from labq.domain.job import JobSpec
from labq.errors import InputError
from labq.formats.source import MAX_DOCUMENT_BYTES, read_document

Format = Literal["auto", "native", "beaker", "teuthology"]
FORMATS: Final = ("auto", "native", "beaker", "teuthology")
_TEUTHOLOGY_KEYS: Final = re.compile(r"^(roles|machine_type|suite|os_type|overrides)\s*:", re.M)


def detect_format(text: str) -> Format:
    """Guess the format: XML is Beaker; YAML with ``roles`` and no recipe sets is Teuthology."""
    head = text.lstrip()
    if head.startswith("<"):
        return "beaker"
    if "recipe_sets" not in text and _TEUTHOLOGY_KEYS.search(text):
        return "teuthology"
    return "native"


def parse_job(text: str, *, source: str, fmt: Format = "auto") -> JobSpec:
    """Parse a job document of any supported format into the canonical model."""
    if fmt == "auto":
        fmt = detect_format(text)
    if fmt == "beaker":
        from labq.formats.beaker_xml import parse_beaker

        return parse_beaker(text, source=source)
    if fmt == "teuthology":
        from labq.formats.teuthology import parse_teuthology

        return parse_teuthology(text, source=source)
    if fmt == "native":
        from labq.formats.native import parse_native

        return parse_native(text, source=source)
    raise InputError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")


def load_job(path: str | Path, *, fmt: Format = "auto", limit: int = MAX_DOCUMENT_BYTES) -> JobSpec:
    """Read and parse a job file."""
    text = read_document(path, limit=limit)
    return parse_job(text, source=str(path), fmt=fmt)
