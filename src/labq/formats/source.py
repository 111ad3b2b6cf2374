"""Reading job documents safely, and telling people where they went wrong.

Every reader here refuses oversized input, YAML alias bombs, duplicate keys,
documents nested deeper than a limit, numbers beyond 64 bits, non-finite
floats and NUL characters (no database stores one), and keeps a map from
document paths to line numbers so that an error found later (by validation)
can still name the line.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic import ValidationError

from labq.errors import InputError

MAX_DOCUMENT_BYTES: Final = 1024 * 1024
MAX_YAML_NODES: Final = 100_000
MAX_DEPTH: Final = 64  # the default of ``limits.depth``
INT64: Final = 2**63
_MAX_DIGITS: Final = 24  # longer numerals are refused before Python converts them
_JSON_NESTING: Final = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')

DocPath = tuple[str | int, ...]


class LineMap:
    """Line numbers of the places in a parsed document."""

    def __init__(self) -> None:
        self._lines: dict[DocPath, int] = {}

    def add(self, path: DocPath, line: int) -> None:
        """Remember that ``path`` starts on ``line`` (1-based)."""
        self._lines.setdefault(path, line)

    def under(self, prefix: DocPath) -> Iterator[DocPath]:
        """The known paths inside ``prefix``, in the order they were added (the document's)."""
        return (p for p in self._lines if p[: len(prefix)] == prefix)

    def line_of(self, path: DocPath) -> int | None:
        """The line of ``path``, or of its nearest known parent."""
        for end in range(len(path), -1, -1):
            line = self._lines.get(path[:end])
            if line is not None:
                return line
        return None


def read_document(path: str | Path, *, limit: int = MAX_DOCUMENT_BYTES) -> str:
    """The text of a job file, refusing what is missing, too big or not UTF-8."""
    source = str(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except FileNotFoundError:
        raise InputError("no such file", source=source) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a job file", source=source) from None
    except OSError as exc:
        raise InputError(f"cannot be read: {exc.strerror}", source=source) from None
    return decode_document(data, source=source, limit=limit)


def decode_document(data: bytes, *, source: str, limit: int = MAX_DOCUMENT_BYTES) -> str:
    """Bytes to text, refusing oversized or non-UTF-8 input."""
    if len(data) > limit:
        raise InputError(f"is larger than the limit of {limit} bytes", source=source)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"is not UTF-8 text (byte {exc.start})", source=source) from None


def format_path(path: DocPath) -> str:
    """``('recipe_sets', 0, 'recipes')`` as ``recipe_sets[0].recipes``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


# --- YAML and JSON -----------------------------------------------------------


def load_yaml(text: str, *, source: str, max_depth: int = MAX_DEPTH) -> tuple[Any, LineMap]:
    """Parse one YAML document into plain data and a line map."""
    data, lines = _yaml_tree(text, source, max_depth)
    _check_values(data, (), source, lines)
    return data, lines


def _yaml_tree(text: str, source: str, max_depth: int) -> tuple[Any, LineMap]:
    try:
        loader = _Loader(text, max_depth)
    except yaml.reader.ReaderError as exc:
        at = text.count("\n", 0, exc.position) + 1
        raise InputError(_reader_problem(exc), source=source, line=at) from None
    try:
        node = loader.get_single_node()
        if node is None:
            raise InputError("the document is empty", source=source)
        _check_node_count(node, source)
        lines = LineMap()
        _map_lines(node, (), lines, source)
        data = loader.construct_document(node)
    except _TooDeepError as exc:
        raise _too_deep(max_depth, source, exc.line) from None
    except yaml.reader.ReaderError as exc:
        raise InputError(_reader_problem(exc), source=source) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or exc.context or "cannot be parsed"
        raise InputError(f"malformed YAML: {problem}", source=source, line=line) from None
    except yaml.YAMLError as exc:
        raise InputError(f"malformed YAML: {exc}", source=source) from None
    finally:
        loader.dispose()
    return data, lines


def load_json(text: str, *, source: str, max_depth: int = MAX_DEPTH) -> tuple[Any, LineMap]:
    """Parse a JSON document; lines come from reading it again as YAML where that works."""
    _check_json_depth(text, max_depth, source)
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys, parse_int=_json_int)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc.msg}", source=source, line=exc.lineno) from None
    except _DuplicateKeyError as exc:
        raise InputError(f"duplicate key {exc.key!r}", source=source) from None
    except _NumberError as exc:
        raise InputError(exc.problem, source=source, line=_line_of(text, exc.numeral)) from None
    try:
        # Characters YAML refuses (C0/C1 controls) may sit in JSON strings; the lines stay put.
        printable = yaml.reader.Reader.NON_PRINTABLE.sub("?", text)
        _, lines = _yaml_tree(printable, source, max_depth)
    except InputError:
        lines = LineMap()
    _check_values(data, (), source, lines)
    return data, lines


class _TooDeepError(Exception):
    def __init__(self, line: int):
        super().__init__(line)
        self.line = line


class _NumberError(ValueError):
    def __init__(self, numeral: str):
        shown = numeral if len(numeral) <= 30 else f"{numeral[:12]}…({len(numeral)} digits)"
        self.numeral = numeral
        self.problem = f"the number {shown} is out of range (64-bit integers at most)"
        super().__init__(self.problem)


class _Loader(yaml.SafeLoader):
    """The safe loader, refusing nesting past ``max_depth`` before it recurses into it,
    and numerals too long to be 64-bit integers before Python converts them."""

    def __init__(self, text: str, max_depth: int):
        super().__init__(text)
        self.max_depth = max_depth
        self.depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self.depth += 1
        try:
            if self.depth > self.max_depth:
                event = self.peek_event()  # type: ignore[no-untyped-call]
                raise _TooDeepError(event.start_mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        numeral = str(node.value).replace("_", "")
        if len(numeral) > _MAX_DIGITS:
            raise yaml.constructor.ConstructorError(
                None, None, _NumberError(numeral).problem, node.start_mark
            )
        return super().construct_yaml_int(node)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


def _reader_problem(exc: yaml.reader.ReaderError) -> str:
    code = ord(exc.character) if isinstance(exc.character, str) else exc.character
    return f"the character U+{code:04X} is not allowed in YAML"


def _too_deep(limit: int, source: str, line: int | None) -> InputError:
    return InputError(
        f"the document is nested deeper than the limit of {limit} levels (limits.depth)",
        source=source,
        line=line,
    )


def _check_json_depth(text: str, limit: int, source: str) -> None:
    """Refuse JSON nested past ``limit`` before the recursive parser meets it."""
    depth = 0
    for token in _JSON_NESTING.finditer(text):
        kind = token.group()
        if kind in "[{":
            depth += 1
            if depth > limit:
                raise _too_deep(limit, source, text.count("\n", 0, token.start()) + 1)
        elif kind in "]}":
            depth -= 1


def _json_int(numeral: str) -> int:
    if len(numeral.lstrip("-")) > _MAX_DIGITS:
        raise _NumberError(numeral)
    return int(numeral)


def _line_of(text: str, numeral: str) -> int | None:
    found = text.find(numeral)
    return None if found < 0 else text.count("\n", 0, found) + 1


def _check_values(data: Any, path: DocPath, source: str, lines: LineMap) -> None:
    """Refuse what no database stores: NUL characters, numbers past 64 bits, NaN, infinity."""
    problem = None
    if isinstance(data, str) and "\x00" in data:
        problem = "must not contain a NUL character"
    elif isinstance(data, bool):
        return
    elif isinstance(data, int) and not -INT64 <= data < INT64:
        problem = _NumberError(str(data)).problem
    elif isinstance(data, float) and not math.isfinite(data):
        problem = f"must be a finite number, not {data}"
    elif isinstance(data, Mapping):
        for key, value in data.items():
            if isinstance(key, str) and "\x00" in key:
                problem = f"the key {key!r} must not contain a NUL character"
                break
            _check_values(value, (*path, str(key)), source, lines)
    elif isinstance(data, list):
        for index, item in enumerate(data):
            _check_values(item, (*path, index), source, lines)
    if problem is not None:
        place = format_path(path)
        raise InputError(problem, source=source, place=place, line=lines.line_of(path))


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str):
        self.key = key
        super().__init__(key)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(key)
        out[key] = value
    return out


def _check_node_count(root: yaml.Node, source: str) -> None:
    """Refuse documents whose aliases expand past MAX_YAML_NODES (a "billion laughs")."""
    expanded: dict[int, int] = {}

    def size(node: yaml.Node) -> int:
        known = expanded.get(id(node))
        if known is not None:
            return known
        expanded[id(node)] = 1  # guards against recursive aliases
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        expanded[id(node)] = total
        if total > MAX_YAML_NODES:
            raise InputError(
                f"the document expands to more than {MAX_YAML_NODES} nodes (an alias bomb?)",
                source=source,
                line=node.start_mark.line + 1,
            )
        return total

    size(root)


def _map_lines(node: yaml.Node, path: DocPath, lines: LineMap, source: str) -> None:
    lines.add(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[object] = set()
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is not None:
                if key in seen:
                    raise InputError(
                        f"duplicate key {key!r}",
                        source=source,
                        place=format_path(path),
                        line=key_node.start_mark.line + 1,
                    )
                seen.add(key)
                lines.add((*path, key), key_node.start_mark.line + 1)
                _map_lines(value_node, (*path, key), lines, source)
    elif isinstance(node, yaml.SequenceNode):
        for index, child in enumerate(node.value):
            _map_lines(child, (*path, index), lines, source)


# --- validation errors -------------------------------------------------------


def validation_error(exc: ValidationError, *, source: str, lines: LineMap) -> InputError:
    """The first problem pydantic found, as one plain-words error with its line, counting
    the others; each of them is in ``every``."""
    errors = exc.errors(include_url=False)
    found = [_one_problem(e, source, lines) for e in errors]
    first = found[0]
    if len(found) == 1:
        return first
    more = len(found) - 1
    problem = f"{first.problem} (and {more} more problem{'s' if more > 1 else ''})"
    return InputError(problem, source=source, place=first.place, line=first.line, every=found)


def _one_problem(error: Any, source: str, lines: LineMap) -> InputError:
    path: DocPath = tuple(p for p in error["loc"] if isinstance(p, str | int))
    inner = (error.get("ctx") or {}).get("path")
    if inner:
        path = (*path, *_split_inner(str(inner)))
    problem = _plain_message(error, path)
    return InputError(problem, source=source, place=format_path(path), line=lines.line_of(path))


def _split_inner(text: str) -> list[str | int]:
    out: list[str | int] = []
    for part in text.replace("[", ".[").split("."):
        if not part:
            continue
        if part.startswith("[") and part.endswith("]") and part[1:-1].isdigit():
            out.append(int(part[1:-1]))
        else:
            out.append(part)
    return out


def _plain_message(error: Mapping[str, Any], path: DocPath) -> str:
    kind = error["type"]
    key = path[-1] if path else ""
    if kind == "extra_forbidden":
        return f"unknown key {key!r}"
    if kind == "missing":
        return f"missing required key {key!r}"
    message = str(error["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    if kind == "too_short" and isinstance(error.get("input"), Sequence):
        least = (error.get("ctx") or {}).get("min_length", 1)
        return "must not be empty" if least == 1 else f"needs at least {least} entries"
    return message[0].lower() + message[1:] if message[:1].isupper() else message
