"""Reading XML job documents safely, and walking them strictly.

No DTD is ever read: a document that declares one (or an entity) is refused
before the parser sees it, which rules out "billion laughs" expansion and
external entities that read local files or the network. The walker helpers
refuse unknown attributes and stray text, so nothing in a document is dropped
without a word.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Final

from lxml import etree

from labq.errors import InputError
from labq.formats.source import MAX_DEPTH

# Comments and CDATA may mention "<!DOCTYPE" harmlessly; skip over them.
_DECLARATION: Final = re.compile(
    r"<!--.*?-->|<!\[CDATA\[.*?\]\]>|<!(DOCTYPE|ENTITY)\b", re.DOTALL | re.IGNORECASE
)
_POSITION: Final = re.compile(r", line \d+, column (\d+)$")


def _parser() -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
        encoding="utf-8",  # the text is already decoded; ignore the declared encoding
    )


def load_xml(text: str, *, source: str, max_depth: int = MAX_DEPTH) -> XmlDoc:
    """Parse an XML document that declares no DTD and no entity, nested ``max_depth`` at most."""
    for found in _DECLARATION.finditer(text):
        if found.group(1):
            line = text.count("\n", 0, found.start()) + 1
            raise InputError(
                f"<!{found.group(1).upper()}> declarations are refused "
                "(they can expand into an XML bomb or read local files)",
                source=source,
                line=line,
            )
    try:
        root = etree.fromstring(text.encode("utf-8"), _parser())
    except etree.XMLSyntaxError as exc:
        message = _POSITION.sub(r" (column \1)", str(exc.msg))
        raise InputError(f"malformed XML: {message}", source=source, line=exc.lineno) from None
    doc = XmlDoc(root, source=source)
    _check_depth(doc, max_depth)
    return doc


def _check_depth(doc: XmlDoc, limit: int) -> None:
    """Refuse elements nested past ``limit`` (the readers recurse once per level).

    Asked of lxml in XPath (C): a walk in Python made an object per element, 0.3 s
    of CPU for a document of 60,000 elements before any limit could refuse it.
    """
    deeper = doc.root.xpath("(/" + "*/" * limit + "*)[1]")
    if isinstance(deeper, list) and deeper and isinstance(deeper[0], etree._Element):
        raise doc.error(
            deeper[0],
            f"the document is nested deeper than the limit of {limit} levels (limits.depth)",
        )


class XmlDoc:
    """A parsed document and the strict helpers that report errors in it."""

    def __init__(self, root: etree._Element, *, source: str) -> None:
        self.root = root
        self.source = source
        self._tree = root.getroottree()

    def place(self, el: etree._Element) -> str:
        """The XPath of an element, e.g. ``/job/recipeSet[2]/recipe``."""
        return str(self._tree.getpath(el))

    @staticmethod
    def line(el: etree._Element) -> int | None:
        """The line ``el`` starts on."""
        line: object = el.sourceline
        return line if isinstance(line, int) else None

    def error(self, el: etree._Element, problem: str) -> InputError:
        """An error at ``el``: its line and its XPath."""
        return InputError(problem, source=self.source, place=self.place(el), line=self.line(el))

    def unknown(self, el: etree._Element) -> InputError:
        """The error for an element that has no place where it stands."""
        parent = el.getparent()
        where = f" in <{parent.tag}>" if parent is not None else ""
        return self.error(el, f"unknown element <{el.tag}>{where}")

    def attributes(self, el: etree._Element, allowed: Collection[str]) -> dict[str, str]:
        """The attributes of ``el``; any not in ``allowed`` is an error."""
        out = {str(k): str(v) for k, v in el.attrib.items()}
        for name in out:
            if name not in allowed:
                raise self.error(el, f"unknown attribute {name} on <{el.tag}>")
        return out

    def required(self, el: etree._Element, attrs: dict[str, str], name: str) -> str:
        """An attribute that must be present and not blank."""
        value = attrs.get(name, "").strip()
        if not value:
            raise self.error(el, f"<{el.tag}> needs the attribute {name}")
        return value

    def children(self, el: etree._Element) -> list[etree._Element]:
        """The child elements of ``el``, refusing text between them."""
        self._no_text(el, el.text)
        out = []
        for child in el:
            if isinstance(child.tag, str):
                out.append(child)
            self._no_text(child, child.tail, parent=el)
        return out

    def leaf(self, el: etree._Element) -> None:
        """Refuse any child element or text inside ``el``."""
        for child in self.children(el):
            raise self.unknown(child)

    def text(self, el: etree._Element) -> str:
        """The text of an element that holds only text, stripped."""
        for child in el:
            if isinstance(child.tag, str):
                raise self.unknown(child)
        return "".join(str(t) for t in el.itertext()).strip()

    def once(self, el: etree._Element, parent: etree._Element, seen: set[str]) -> None:
        """Refuse a second element of the same kind where only one is allowed."""
        if el.tag in seen:
            raise self.error(el, f"<{parent.tag}> may have only one <{el.tag}>")
        seen.add(str(el.tag))

    def _no_text(
        self, el: etree._Element, text: str | None, parent: etree._Element | None = None
    ) -> None:
        if text and text.strip():
            where = parent if parent is not None else el
            shown = text.strip()
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            raise self.error(el, f"unexpected text {shown!r} in <{where.tag}>")
