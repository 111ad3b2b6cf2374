"""Reading job documents safely, and telling people where they went wrong.

Every reader here refuses oversized input, YAML alias bombs, duplicate keys,
documents nested deeper than a limit, lists longer than a job's limits (while
reading), numbers beyond 64 bits, non-finite floats, NUL characters and lone
UTF-16 surrogates (no database stores them), and keeps a map from
document paths to line numbers so that an error found later (by validation)
can still name the line.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic import ValidationError

from labq.errors import InputError
from labq.formats.bounds import ListLimits
from labq.formats.lines import DocPath as DocPath  # defined there, read from here too
from labq.formats.lines import LineMap as LineMap
from labq.formats.lines import format_path as format_path
from labq.formats.yamltree import MAX_DIGITS as _MAX_DIGITS
from labq.formats.yamltree import TooDeepError, YamlReader, read_yaml

MAX_DOCUMENT_BYTES: Final = 1024 * 1024
MAX_DEPTH: Final = 64  # the default of ``limits.depth``
INT64: Final = 2**63
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_JSON_NESTING: Final = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


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


# --- YAML and JSON -----------------------------------------------------------


def load_yaml(
    text: str, *, source: str, max_depth: int = MAX_DEPTH, lists: ListLimits | None = None
) -> tuple[Any, LineMap]:
    """Parse one YAML document into plain data and a line map, within ``lists``' limits."""
    data, lines = _yaml_tree(text, source, max_depth, lists)
    _check_values(data, (), source, lines)
    return data, lines


def _yaml_tree(
    text: str, source: str, max_depth: int, lists: ListLimits | None, *, build: bool = True
) -> tuple[Any, LineMap]:
    try:
        return read_yaml(text, source=source, max_depth=max_depth, lists=lists, build=build)
    except TooDeepError as exc:
        raise _too_deep(max_depth, source, exc.line) from None
    except yaml.reader.ReaderError as exc:
        # libyaml counts the position in bytes of UTF-8
        at = text.encode("utf-8", "surrogatepass")[: exc.position].count(b"\n") + 1
        raise InputError(_reader_problem(exc), source=source, line=at) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or exc.context or "cannot be parsed"
        if problem.startswith("exceeded maximum nesting depth"):  # libyaml's own limit
            raise _too_deep(max_depth, source, line) from None
        raise InputError(f"malformed YAML: {problem}", source=source, line=line) from None
    except yaml.YAMLError as exc:
        raise InputError(f"malformed YAML: {exc}", source=source) from None


def load_json(
    text: str, *, source: str, max_depth: int = MAX_DEPTH, lists: ListLimits | None = None
) -> tuple[Any, LineMap]:
    """Parse a JSON document, within ``lists``' limits.

    Lines come from reading it again as YAML, only when an error needs one: the
    json module reads a megabyte in milliseconds, a second reading costs more.
    """
    _check_json_depth(text, max_depth, source)
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys, parse_int=_json_int)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc.msg}", source=source, line=exc.lineno) from None
    except _DuplicateKeyError as exc:
        raise InputError(f"duplicate key {exc.key!r}", source=source) from None
    except _NumberError as exc:
        raise InputError(exc.problem, source=source, line=_line_of(text, exc.numeral)) from None

    def fill(lines: LineMap, wanted: DocPath | None) -> None:
        # Characters YAML refuses (C0/C1 controls) may sit in JSON strings; the lines stay put.
        printable = yaml.reader.Reader.NON_PRINTABLE.sub("?", text)
        try:
            reader = YamlReader(printable, source=source, max_depth=max_depth, build=False)
        except InputError:
            return  # surrogate escapes beside private-use characters: no lines, still a job
        # the lines read before a problem (e.g. past MAX_NODES) are kept
        with contextlib.suppress(InputError, TooDeepError, yaml.YAMLError):
            reader.read(until=wanted)
        for path, line in reader.lines.items():
            lines.add(path, line)

    lines = LineMap(fill)
    if lists is not None:
        lists.check(data, source=source, lines=lines)
    _check_values(data, (), source, lines)
    return data, lines


class _NumberError(ValueError):
    def __init__(self, numeral: str):
        shown = numeral if len(numeral) <= 30 else f"{numeral[:12]}…({len(numeral)} digits)"
        self.numeral = numeral
        self.problem = f"the number {shown} is out of range (64-bit integers at most)"
        super().__init__(self.problem)


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
    """Refuse what no database stores: NUL characters, lone UTF-16 surrogates (half a
    character, which UTF-8 cannot encode), numbers past 64 bits, NaN, infinity."""
    pending: list[tuple[Any, DocPath]] = [(data, path)]
    while pending:
        value, at = pending.pop()
        problem = None
        if isinstance(value, str):
            problem = _text_problem(value)
        elif isinstance(value, bool):
            continue
        elif isinstance(value, int) and not -INT64 <= value < INT64:
            problem = _NumberError(str(value)).problem
        elif isinstance(value, float) and not math.isfinite(value):
            problem = f"must be a finite number, not {value}"
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if isinstance(key, str) and (wrong := _text_problem(key)) is not None:
                    line = lines.line_of((*at, key))  # the key's own line
                    problem = f"the key {key!r} {wrong}"
                    raise InputError(problem, source=source, place=format_path(at), line=line)
                pending.append((item, (*at, str(key))))
        elif isinstance(value, list | tuple | set | frozenset):
            pending.extend((item, (*at, i)) for i, item in enumerate(value))
        if problem is not None:
            raise InputError(problem, source=source, place=format_path(at), line=lines.line_of(at))


def _text_problem(text: str) -> str | None:
    if "\x00" in text:
        return "must not contain a NUL character"
    lone = _SURROGATE.search(text)
    if lone is not None:
        return (
            f"must not contain the lone surrogate U+{ord(lone.group()):04X} "
            "(half of a UTF-16 pair: not a character)"
        )
    return None


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
