"""How long a list at a given place of a document may be, checked while it is read.

A job's limits (``limits.tasks_per_recipe``...) bound lists at known places:
the reader of a format refuses a list as soon as it grows past its bound, so a
document with 60,000 tasks costs the reading of 501 of them, not of all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from labq.errors import InputError
from labq.formats.lines import DocPath, LineMap, format_path

# A pattern part: a key, ``int`` for any index of a list, ``str`` for any key.
Part = str | type[int] | type[str]


@dataclass(frozen=True)
class ListLimit:
    """The most items a list may hold, and the setting that says so."""

    limit: int
    name: str  # the setting, e.g. ``tasks_per_recipe``
    what: str  # what the items are, e.g. ``tasks``

    def refusal(
        self, path: DocPath, *, source: str, line: int | None, count: int | None = None
    ) -> InputError:
        """The error for a list past the limit; ``count`` when the whole list was read
        (else it was read as far as the first item past the limit)."""
        counted = f"{self.limit + 1} or more" if count is None else str(count)
        said = f"{counted} {self.what} is more than"
        return InputError(
            f"{said} the limit of {self.limit} (limits.{self.name})",
            source=source,
            place=format_path(path),
            line=line,
        )


class ListLimits:
    """The bounded lists of a format, by the pattern of their place."""

    def __init__(self, bounds: Sequence[tuple[tuple[Part, ...], ListLimit]]) -> None:
        self._by_length: dict[int, list[tuple[tuple[Part, ...], ListLimit]]] = {}
        for pattern, bound in bounds:
            self._by_length.setdefault(len(pattern), []).append((pattern, bound))

    def of(self, path: DocPath) -> ListLimit | None:
        """The limit of the list at ``path``, if one applies."""
        for pattern, bound in self._by_length.get(len(path), ()):
            if all(_matches(part, step) for part, step in zip(pattern, path, strict=True)):
                return bound
        return None

    def check(self, data: object, *, source: str, lines: LineMap) -> None:
        """Refuse a list of already-parsed ``data`` that is longer than its limit.

        Only the places some pattern leads to are visited, not the whole document.
        """
        pending: list[tuple[object, DocPath]] = [(data, ())]
        while pending:
            value, path = pending.pop()
            children: list[tuple[str | int, object]]
            if isinstance(value, list):
                bound = self.of(path)
                if bound is not None and len(value) > bound.limit:
                    line = lines.line_of(path)
                    raise bound.refusal(path, source=source, line=line, count=len(value))
                children = list(enumerate(value))
            elif isinstance(value, Mapping):
                children = [(k, v) for k, v in value.items() if isinstance(k, str)]
            else:
                continue
            pending.extend((v, (*path, k)) for k, v in children if self._leads((*path, k)))

    def _leads(self, path: DocPath) -> bool:
        """Whether some bounded list is at ``path`` or below it."""
        for length, bounds in self._by_length.items():
            if length >= len(path):
                for pattern, _ in bounds:
                    if all(_matches(part, step) for part, step in zip(pattern, path)):  # noqa: B905
                        return True
        return False


def _matches(part: Part, step: str | int) -> bool:
    if part is int:
        return isinstance(step, int)
    if part is str:
        return isinstance(step, str)
    return part == step
