"""Choosing a job format and parsing a document with it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from labq.domain.job import JobSpec
from labq.errors import InputError
from labq.formats.limits import Limits, check_counts
from labq.formats.names import FORMATS, Format
from labq.formats.origins import Origins
from labq.formats.source import read_document

DEFAULTS: Final = Limits()
_TEUTHOLOGY_KEYS: Final = re.compile(
    r"^(roles|targets|tasks|machine_type|suite|os_type|overrides)\s*:", re.M
)


def detect_format(text: str) -> Format:
    """Guess the format: XML is Beaker; YAML with ``roles`` and no recipe sets is Teuthology."""
    head = text.lstrip()
    if head.startswith("<"):
        return "beaker"
    if "recipe_sets" not in text and _TEUTHOLOGY_KEYS.search(text):
        return "teuthology"
    return "native"


def parse_job(
    text: str, *, source: str, fmt: Format = "auto", limits: Limits = DEFAULTS
) -> JobSpec:
    """Parse a job document of any supported format into the canonical model, within ``limits``."""
    return read_job(text, source=source, fmt=fmt, limits=limits)[0]


def read_job(
    text: str, *, source: str, fmt: Format = "auto", limits: Limits = DEFAULTS
) -> tuple[JobSpec, Origins]:
    """``parse_job``, and where each part of the job came from: the checks made once it is
    parsed (can any system run it?) name the line and place the person wrote."""
    if fmt == "auto":
        fmt = detect_format(text)
    spec, origins = _parse(text, source, fmt, limits)
    check_counts(spec, limits, source=source)  # what the readers could not see, e.g. guests
    return spec, origins


def _parse(text: str, source: str, fmt: Format, limits: Limits) -> tuple[JobSpec, Origins]:
    if fmt == "beaker":
        from labq.formats.beaker_xml import read_beaker

        return read_beaker(text, source=source, limits=limits)
    if fmt == "teuthology":
        from labq.formats.teuthology import read_teuthology

        return read_teuthology(text, source=source, limits=limits)
    if fmt == "native":
        from labq.formats.native import read_native

        return read_native(text, source=source, limits=limits)
    raise InputError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")


def load_job(path: str | Path, *, fmt: Format = "auto", limits: Limits = DEFAULTS) -> JobSpec:
    """Read and parse a job file, within ``limits`` (its size too)."""
    return locate_job(path, fmt=fmt, limits=limits)[0]


def locate_job(
    path: str | Path, *, fmt: Format = "auto", limits: Limits = DEFAULTS
) -> tuple[JobSpec, Origins]:
    """``load_job``, and where each part of the job came from in the file."""
    text = read_document(path, limit=limits.document_bytes)
    return read_job(text, source=str(path), fmt=fmt, limits=limits)
