"""Places in a parsed document (``recipe_sets[0].tasks``) and the lines they start on."""

from __future__ import annotations

from collections.abc import Callable, Iterator

DocPath = tuple[str | int, ...]


class LineMap:
    """Line numbers of the places in a parsed document.

    A map may be filled on use (``fill(map, path)`` adds lines until it has met
    ``path``, or the whole document for ``None``): a JSON document is read by the json
    module, and its lines are looked for only when an error needs one.
    """

    def __init__(self, fill: Callable[[LineMap, DocPath | None], None] | None = None) -> None:
        self._lines: dict[DocPath, int] = {}
        self._fill = fill
        self._whole = fill is None  # every place of the document is known

    def add(self, path: DocPath, line: int) -> None:
        """Remember that ``path`` starts on ``line`` (1-based)."""
        self._lines.setdefault(path, line)

    def items(self) -> list[tuple[DocPath, int]]:
        """Every place known, with its line."""
        return list(self._lines.items())

    def under(self, prefix: DocPath) -> Iterator[DocPath]:
        """The known paths inside ``prefix``, in the order they were added (the document's)."""
        if not self._whole and self._fill is not None:
            self._fill(self, None)
            self._whole = True
        return (p for p in list(self._lines) if p[: len(prefix)] == prefix)

    def line_of(self, path: DocPath) -> int | None:
        """The line of ``path``, or of its nearest known parent."""
        if self._fill is not None and path not in self._lines:
            self._fill(self, path)
        for end in range(len(path), -1, -1):
            line = self._lines.get(path[:end])
            if line is not None:
                return line
        return None


def format_path(path: DocPath) -> str:
    """``('recipe_sets', 0, 'recipes')`` as ``recipe_sets[0].recipes``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
