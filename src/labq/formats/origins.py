"""Where each part of a translated job came from, so errors name the original file.

The Beaker and Teuthology readers build a job in native form and validate it
with the one validation path (``JobSpec.model_validate``). While they build it,
they note for each native path the line and the place (an XPath, a YAML path) of
the input it came from; a validation error is then reported against the input
the user wrote, not against the native form they never saw.
"""

from __future__ import annotations

import re
from typing import Any, Final

from pydantic import ValidationError

from labq.domain.job import JobSpec
from labq.errors import InputError
from labq.formats.source import DocPath, LineMap, format_path, validation_error

_LAST_PART: Final = re.compile(r"(?:\.[^.\[]*|\[\d+\])$")


class Origins:
    """Native paths mapped to the line and place of the input they came from."""

    def __init__(self, source: str, lines: LineMap | None = None) -> None:
        """``lines``: a native document's own line map (its places are its paths)."""
        self.source = source
        self.lines = lines or LineMap()
        self._places: dict[str, str] = {}

    def add(self, path: DocPath, line: int | None, place: str) -> None:
        """Remember that native ``path`` was read from ``place`` on ``line``."""
        if line is not None:
            self.lines.add(path, line)
        self._places.setdefault(format_path(path), place)

    def place_of(self, native_place: str) -> str:
        """The input place of a native place, or of its nearest known parent."""
        text = native_place
        while True:
            found = self._places.get(text)
            if found is not None:
                return found
            shorter = _LAST_PART.sub("", text, count=1)
            if shorter == text:
                return native_place
            text = shorter

    def locate(self, path: DocPath, key: str | None = None) -> tuple[int | None, str]:
        """The line and input place of native ``path``; with ``key``, of the first place inside
        it that ends in that key (a property inside a host requirement), if the input has one."""
        if key is not None:
            path = next((p for p in self.lines.under(path) if p[-1] == key), path)
        return self.lines.line_of(path), self.place_of(format_path(path))

    def validate(self, data: dict[str, Any]) -> JobSpec:
        """Validate native data, reporting a problem at its place in the input."""
        try:
            return JobSpec.model_validate(data)
        except ValidationError as exc:
            err = validation_error(exc, source=self.source, lines=self.lines)
            raise self._in_input(err) from None

    def _in_input(self, err: InputError) -> InputError:
        """A problem found in the native form, told at its place in the input."""
        return InputError(
            err.problem,
            source=self.source,
            place=self.place_of(err.place),
            line=err.line,
            every=[self._in_input(e) for e in err.every],
        )
