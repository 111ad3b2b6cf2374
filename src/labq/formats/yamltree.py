"""Reading YAML into plain data in one pass over libyaml's events, refusing as it goes.

PyYAML's own loader builds a node per value in pure Python and only then can
anything be checked: a 1 MB document took seconds before a limit refused it.
Here libyaml (C) parses, and one pass over its events builds the data and the
line of every place, and refuses on the spot nesting past the depth limit, more
than MAX_NODES nodes (aliases counted expanded: no "billion laughs"), a list
longer than its job limit, a duplicate key and an alias inside its own anchor.
Tags resolve and scalars are constructed as ``yaml.SafeLoader`` does; no other
tag is read.

libyaml refuses the JSON escapes of UTF-16 surrogates (``"\\ud83d\\ude00"``,
valid JSON and so valid YAML 1.2); they are read through stand-ins (see
``labq.formats.surrogates``) and a pair is joined into its character.
"""

from __future__ import annotations

import re
from typing import Any, Final, cast

import yaml
from yaml.constructor import SafeConstructor
from yaml.events import (
    AliasEvent,
    CollectionStartEvent,
    DocumentStartEvent,
    Event,
    MappingStartEvent,
    ScalarEvent,
    SequenceStartEvent,
    StreamEndEvent,
)

from labq.errors import InputError
from labq.formats.bounds import ListLimit, ListLimits
from labq.formats.lines import DocPath, LineMap, format_path
from labq.formats.surrogates import Surrogates

# libyaml's parser; a PyYAML built without libyaml gives the same events, in pure Python
_Parser: Final = yaml.CBaseLoader if yaml.__with_libyaml__ else yaml.BaseLoader

MAX_NODES: Final = 100_000
MAX_DIGITS: Final = 24  # longer numerals are refused before Python converts them
_TAG: Final = "tag:yaml.org,2002:"
_SCALAR_TAGS: Final = frozenset(
    _TAG + name for name in ("null", "bool", "int", "float", "binary", "timestamp", "str")
)
_DECIMAL: Final = re.compile(r"[-+]?(?:0|[1-9][0-9]*)\Z")  # not 0o17, 0x1f, 1_000, 1:30
_MAP_TAGS: Final = frozenset({_TAG + "map", _TAG + "set"})
_SEQ_TAGS: Final = frozenset({_TAG + "seq", _TAG + "omap", _TAG + "pairs"})


class TooDeepError(Exception):
    """Nesting past the limit, at ``line``: the caller words it."""

    def __init__(self, line: int):
        super().__init__(line)
        self.line = line


class _Found(Exception):  # noqa: N818 - not an error: the place looked for is found
    """``read(until=...)`` met its place."""


class _Resolver(yaml.resolver.Resolver):
    """The implicit tags of yaml.SafeLoader (``yes`` is true, ``1_000`` an int...)."""


class _Open:
    """A mapping or sequence being read."""

    __slots__ = (
        "anchor",
        "count",
        "key",
        "keys",
        "limit",
        "line",
        "merges",
        "path",
        "tag",
        "value",
    )

    def __init__(self, event: CollectionStartEvent, path: DocPath | None, count: int, tag: str):
        self.anchor = event.anchor
        self.path = path
        self.line = _line(event)
        self.count = count  # nodes read before this one: its size is the difference at its end
        self.tag = tag
        self.value: Any = {} if isinstance(event, MappingStartEvent) else []
        self.key: Any = _NO_KEY
        self.keys: set[str] = set()  # keys as written: '1' and 1 are one key twice
        self.merges: list[dict[Any, Any]] = []
        self.limit: ListLimit | None = None


_NO_KEY: Final = object()
_OPEN: Final = object()  # an anchor whose node is still being read


class YamlReader:
    """One document read from libyaml's events; ``read`` gives its data and lines."""

    def __init__(
        self,
        text: str,
        *,
        source: str,
        max_depth: int,
        lists: ListLimits | None = None,
        build: bool = True,
    ) -> None:
        self.surrogates = Surrogates.of(text, source)
        self.text = self.surrogates.text if self.surrogates else text
        self.source = source
        self.max_depth = max_depth
        self.lists = lists
        self.build = build  # without it, only lines and limits (a JSON document's lines)
        self.lines = LineMap()
        self.until: DocPath | None = None
        self.count = 0
        self.anchors: dict[str, tuple[Any, int] | object] = {}
        self.constructor = SafeConstructor()
        self.resolver = _Resolver()
        self.plain_tags: dict[str, str] = {}

    def read(self, *, until: DocPath | None = None) -> tuple[Any, LineMap]:
        """The document's data and lines; raises yaml.YAMLError, InputError, TooDeepError.

        With ``until``, reading stops once that place is met (its line is all that is wanted).
        """
        self.until = until
        parser = _Parser(self.text)
        try:
            parser.get_event()  # the stream's start
            if parser.check_event(StreamEndEvent):
                raise InputError("the document is empty", source=self.source)
            data = self._document(parser)
            if not parser.check_event(StreamEndEvent):
                raise InputError(
                    "expected one document, found a second one",
                    source=self.source,
                    line=_line(parser.get_event()),
                )
        except _Found:
            return None, self.lines
        finally:
            parser.dispose()
        return data, self.lines

    def _note(self, path: DocPath, line: int) -> None:
        self.lines.add(path, line)
        if path == self.until:
            raise _Found

    def _document(self, parser: Any) -> Any:
        event = parser.get_event()
        assert isinstance(event, DocumentStartEvent)
        stack: list[_Open] = []
        while True:
            event = parser.get_event()
            if isinstance(event, CollectionStartEvent):
                stack.append(self._open(event, stack))
                continue
            if isinstance(event, ScalarEvent | AliasEvent):
                path = self._path_of(stack)
                value = self._scalar(event, stack, path) if isinstance(event, ScalarEvent) else None
                if isinstance(event, AliasEvent):
                    value = self._alias(event)
            else:  # the end of a collection
                value = self._close(stack.pop())
            if not stack:
                parser.get_event()  # the document's end
                return value
            self._attach(stack[-1], value, event)

    # --- nodes --------------------------------------------------------------------

    def _counted(self, event: Event, size: int = 1) -> None:
        self.count += size
        if self.count > MAX_NODES:
            expands = " through its aliases (an alias bomb?)" if size > 1 else ""
            raise InputError(
                f"the document has more than {MAX_NODES} nodes{expands}; "
                "labq reads job documents up to that size",
                source=self.source,
                line=_line(event),
            )

    def _depth(self, stack: list[_Open], event: Event) -> None:
        if len(stack) >= self.max_depth:
            raise TooDeepError(_line(event))

    def _path_of(self, stack: list[_Open]) -> DocPath | None:
        """The place of the node about to be read (None under a key that is not text)."""
        if not stack:
            return ()
        top = stack[-1]
        if top.path is None:
            return None
        if isinstance(top.value, list):
            return (*top.path, len(top.value))
        if top.key is _NO_KEY:
            return None  # a key: its line is noted by _attach
        place: DocPath | None = top.key[1]
        return place

    def _open(self, event: CollectionStartEvent, stack: list[_Open]) -> _Open:
        self._depth(stack, event)
        self._counted(event)
        is_map = isinstance(event, MappingStartEvent)
        tag = event.tag if event.tag not in (None, "!") else _TAG + ("map" if is_map else "seq")
        if tag not in (_MAP_TAGS if is_map else _SEQ_TAGS):
            raise _tag_error(tag, event)
        path = self._path_of(stack)
        node = _Open(event, path, self.count, tag)
        if path is not None:
            self._note(path, node.line)
            if not is_map and self.lists is not None:
                node.limit = self.lists.of(path)
        if node.anchor is not None:
            self.anchors[node.anchor] = _OPEN
        return node

    def _close(self, node: _Open) -> Any:
        value = node.value
        if node.merges:
            merged: dict[Any, Any] = {}
            for source in reversed(node.merges):  # the first one written wins, as in PyYAML
                merged.update(source)
            merged.update(value)
            value = merged
        if node.tag == _TAG + "set":
            value = set(value)
        elif node.tag in (_TAG + "omap", _TAG + "pairs"):
            value = _pairs(value, node, self.source)
        if node.anchor is not None:
            self.anchors[node.anchor] = (value, self.count - node.count + 1)
        return value

    def _alias(self, event: AliasEvent) -> Any:
        found = self.anchors.get(event.anchor or "")
        if found is None:
            raise _marked(f"found undefined alias *{event.anchor}", event)
        if found is _OPEN:
            raise _marked(f"the alias *{event.anchor} is inside its own anchor", event)
        value, size = cast(tuple[Any, int], found)
        self._counted(event, size)
        return value

    def _scalar(self, event: ScalarEvent, stack: list[_Open], path: DocPath | None) -> Any:
        self._depth(stack, event)
        self._counted(event)
        if path is not None:
            self._note(path, _line(event))
        text = event.value
        if self.surrogates is not None:
            text = self.surrogates.restore(text, event.style)
        value = self._construct(event, text) if self.build else text
        if event.anchor is not None:
            self.anchors[event.anchor] = (value, 1)
        return value

    def _construct(self, event: ScalarEvent, text: str) -> Any:
        tag = event.tag
        if tag in (None, "!"):
            tag = self._resolve(text, event.implicit)
        if tag == _TAG + "str":
            return text
        if tag == _TAG + "int" and _DECIMAL.match(text) and len(text) <= MAX_DIGITS:
            return int(text)  # the common case, without a node and a constructor call
        if tag in (_TAG + "merge", _TAG + "value"):
            return _Special(tag, text)  # a key's meaning, settled by _attach
        if tag not in _SCALAR_TAGS:
            raise _tag_error(tag, event)
        if tag == _TAG + "int" and len(text.replace("_", "").lstrip("+-")) > MAX_DIGITS:
            shown = f"{text[:12]}…({len(text)} digits)"
            raise _marked(f"the number {shown} is out of range (64-bit integers at most)", event)
        start: Any = event.start_mark  # libyaml's marks are a type of their own
        node = yaml.ScalarNode(tag, text, start, start, event.style)
        try:
            value = self.constructor.yaml_constructors[tag](self.constructor, node)
        except (ValueError, OverflowError) as exc:
            raise _marked(
                f"cannot read {text!r} as {tag.removeprefix(_TAG)}: {exc}", event
            ) from None
        if tag == _TAG + "float" and isinstance(value, float):
            return WrittenFloat.of(value, text)
        return value

    def _resolve(self, text: str, implicit: tuple[bool, bool]) -> str:
        """The implicit tag of a scalar; short plain ones (numbers, words) are cached."""
        if not implicit[0] or len(text) > 32:
            return _resolve(self.resolver, text, implicit)
        tag = self.plain_tags.get(text)
        if tag is None:
            tag = self.plain_tags[text] = _resolve(self.resolver, text, implicit)
        return tag

    def _attach(self, top: _Open, value: Any, event: Event) -> None:
        """Put a finished node into the collection it belongs to."""
        if isinstance(value, _Special) and not (isinstance(top.value, dict) and top.key is _NO_KEY):
            raise _tag_error(value.tag, event)  # '<<' or '=' anywhere but as a key
        if isinstance(top.value, list):
            if top.limit is not None and len(top.value) >= top.limit.limit:
                assert top.path is not None
                line = self.lines.line_of(top.path)  # its key's line, as other errors say
                raise top.limit.refusal(top.path, source=self.source, line=line)
            top.value.append(value)
            return
        if top.key is _NO_KEY:
            top.key = self._key(top, value, event)
            return
        key, _ = top.key
        top.key = _NO_KEY
        if isinstance(key, _Special) and key.tag == _TAG + "merge":
            top.merges.extend(_merge_sources(value, event))
        elif self.build:
            top.value[key] = value

    def _key(self, top: _Open, key: Any, event: Event) -> tuple[Any, DocPath | None]:
        """(the key, the place of its value); a key seen before is refused."""
        written = event.value if isinstance(event, ScalarEvent) else None
        if isinstance(key, _Special):
            if key.tag == _TAG + "merge":
                return key, None
            key = key.text  # '=' as a key is text, as in yaml.SafeLoader
        if written is not None:
            if written in top.keys or (self.build and key in top.value):
                raise InputError(
                    f"duplicate key {written!r}",
                    source=self.source,
                    place=format_path(top.path or ()),
                    line=_line(event),
                )
            top.keys.add(written)
        try:
            hash(key)
        except TypeError:
            raise _marked("found a key that is a list or mapping", event) from None
        if top.path is None or written is None:
            return key, None
        place = (*top.path, key if isinstance(key, str) else written)
        self._note(place, _line(event))
        return key, place


def _resolve(resolver: yaml.resolver.Resolver, text: str, implicit: tuple[bool, bool]) -> str:
    tag: str = resolver.resolve(yaml.ScalarNode, text, implicit)  # type: ignore[no-untyped-call]
    return tag


class WrittenFloat(float):
    """A float that remembers how it was written: an unquoted ``os_version: 8.10`` is the
    number 8.1 to YAML, but the version 8.10 to the user who wrote it."""

    written: str

    @classmethod
    def of(cls, value: float, written: str) -> WrittenFloat:
        out = cls(value)
        out.written = written
        return out


def _represent_written(
    dumper: yaml.representer.BaseRepresenter, data: WrittenFloat
) -> yaml.ScalarNode:
    """Dump a float as its document wrote it (a suite's merged config keeps ``8.10``)."""
    return dumper.represent_scalar(_TAG + "float", data.written)


# PyYAML's dumpers look a value's type up exactly: without this, dumping data read here
# (``yaml.safe_dump`` of a suite's config) would fail on every float
yaml.SafeDumper.add_representer(WrittenFloat, _represent_written)
yaml.Dumper.add_representer(WrittenFloat, _represent_written)


def as_written(value: object) -> object:
    """A scalar as its document wrote it, where the reader kept that (floats); else itself."""
    return value.written if isinstance(value, WrittenFloat) else value


class _Special:
    """A scalar whose meaning depends on being a key: ``<<`` (merge) or ``=``."""

    def __init__(self, tag: str, text: str):
        self.tag = tag
        self.text = text


def _merge_sources(value: Any, event: Event) -> list[dict[Any, Any]]:
    """The mappings ``<<:`` merges, in the order written."""
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return value
    raise _marked("'<<' must be followed by a mapping or a list of mappings", event)


def _pairs(items: list[Any], node: _Open, source: str) -> list[tuple[Any, Any]]:
    out: list[tuple[Any, Any]] = []
    for item in items:
        if not isinstance(item, dict) or len(item) != 1:
            raise InputError(
                f"each entry of !!{node.tag.removeprefix(_TAG)} must be a one-key mapping",
                source=source,
                line=node.line,
            )
        out.extend(item.items())
    return out


def _line(event: Event | None) -> int:
    mark = event.start_mark if event is not None else None
    return mark.line + 1 if mark is not None else 1


def _marked(problem: str, event: Event) -> yaml.MarkedYAMLError:
    mark: Any = event.start_mark  # libyaml's marks are a type of their own
    return yaml.MarkedYAMLError(problem=problem, problem_mark=mark)


def _tag_error(tag: str, event: Event) -> yaml.MarkedYAMLError:
    kind = "a mapping" if isinstance(event, MappingStartEvent) else "a list"
    kind = "a value" if isinstance(event, ScalarEvent) else kind
    if not isinstance(event, SequenceStartEvent | MappingStartEvent | ScalarEvent):
        kind = "a node"
    return _marked(f"the tag {tag!r} on {kind} is not one labq reads", event)


def read_yaml(
    text: str,
    *,
    source: str,
    max_depth: int,
    lists: ListLimits | None = None,
    build: bool = True,
) -> tuple[Any, LineMap]:
    """Read one YAML document (see YamlReader); raises yaml.YAMLError, InputError, TooDeepError."""
    return YamlReader(text, source=source, max_depth=max_depth, lists=lists, build=build).read()
