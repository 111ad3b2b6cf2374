"""Beaker recipe elements that labq keeps as recipe metadata.

These steer provisioning (kickstart, packages, repositories, partitions) or
the lab's behaviour around a recipe (watchdog, reservation). labq's scheduler
does not act on them; they travel with the recipe for the provisioning backend,
checked for shape so that a typo is reported rather than carried along.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

from lxml import etree

from labq.formats.xmltree import XmlDoc

_DIGITS: Final = re.compile(r"[0-9]{1,18}")  # longer: past 64 bits
_RESERVE_WHEN: Final = ("always", "onabort", "onfail", "onwarn")
_PANIC: Final = ("ignore", "None")
_BOOLEAN: Final = {"true": True, "1": True, "false": False, "0": False}


def _watchdog(doc: XmlDoc, el: etree._Element) -> dict[str, Any]:
    attrs = doc.attributes(el, ("panic",))
    doc.leaf(el)
    panic = attrs.get("panic")
    if panic is not None and panic not in _PANIC:
        raise doc.error(el, f"<watchdog> panic must be 'ignore' or 'None', not {panic!r}")
    return attrs


def _reservesys(doc: XmlDoc, el: etree._Element) -> dict[str, Any]:
    attrs = doc.attributes(el, ("duration", "when"))
    doc.leaf(el)
    out: dict[str, Any] = {}
    if "duration" in attrs:
        out["duration"] = integer(doc, el, "duration", attrs["duration"], least=1)
    when = attrs.get("when")
    if when is not None:
        if when not in _RESERVE_WHEN:
            raise doc.error(
                el, f"<reservesys> when must be one of {', '.join(_RESERVE_WHEN)}, not {when!r}"
            )
        out["when"] = when
    return out


def _autopick(doc: XmlDoc, el: etree._Element) -> dict[str, Any]:
    attrs = doc.attributes(el, ("random",))
    doc.leaf(el)
    if "random" not in attrs:
        return {}
    word = attrs["random"].strip().lower()
    if word not in _BOOLEAN:
        raise doc.error(el, f"<autopick> random must be true or false, not {attrs['random']!r}")
    return {"random": _BOOLEAN[word]}


def _items(
    doc: XmlDoc, el: etree._Element, tag: str, read: Callable[[etree._Element], Any]
) -> list[Any]:
    doc.attributes(el, ())
    out = []
    for child in doc.children(el):
        if child.tag != tag:
            raise doc.unknown(child)
        out.append(read(child))
    return out


def _packages(doc: XmlDoc, el: etree._Element) -> list[Any]:
    def package(child: etree._Element) -> str:
        attrs = doc.attributes(child, ("name",))
        doc.leaf(child)
        return doc.required(child, attrs, "name")

    return _items(doc, el, "package", package)


def _repos(doc: XmlDoc, el: etree._Element) -> list[Any]:
    def repo(child: etree._Element) -> dict[str, str]:
        attrs = doc.attributes(child, ("name", "url"))
        doc.leaf(child)
        return {
            "name": doc.required(child, attrs, "name"),
            "url": doc.required(child, attrs, "url"),
        }

    return _items(doc, el, "repo", repo)


def _ks_appends(doc: XmlDoc, el: etree._Element) -> list[Any]:
    def ks_append(child: etree._Element) -> str:
        doc.attributes(child, ())
        return doc.text(child)

    return _items(doc, el, "ks_append", ks_append)


def _partitions(doc: XmlDoc, el: etree._Element) -> list[Any]:
    def partition(child: etree._Element) -> dict[str, Any]:
        attrs = doc.attributes(child, ("fs", "name", "type", "size"))
        doc.leaf(child)
        out: dict[str, Any] = {"name": doc.required(child, attrs, "name")}
        out["size"] = integer(doc, child, "size", doc.required(child, attrs, "size"), least=1)
        out.update({k: attrs[k] for k in ("fs", "type") if k in attrs})
        return out

    return _items(doc, el, "partition", partition)


_DISTRO_URLS: Final = ("tree", "kernel", "initrd")
_DISTRO_VALUES: Final = ("arch", "name", "variant")


def custom_distro(doc: XmlDoc, el: etree._Element) -> dict[str, Any]:
    """``<distro>``: a tree Beaker does not know, given by URLs (passed to the reimage hook).

    ``tree``, ``kernel``, ``initrd``, ``arch`` and ``osversion major=`` are required;
    ``name``, ``variant`` and ``osversion minor=`` optional. Kernel and initrd URLs
    may be relative to the tree's, as in Beaker.
    """
    doc.attributes(el, ())
    out: dict[str, Any] = {}
    for child in doc.children(el):
        tag = str(child.tag)
        if tag in out:
            raise doc.error(child, f"<distro> may have only one <{tag}>")
        if tag in _DISTRO_URLS:
            attrs = doc.attributes(child, ("url",))
            out[tag] = doc.required(child, attrs, "url")
        elif tag in _DISTRO_VALUES:
            attrs = doc.attributes(child, ("value",))
            out[tag] = doc.required(child, attrs, "value")
        elif tag == "osversion":
            attrs = doc.attributes(child, ("major", "minor"))
            version = {"major": doc.required(child, attrs, "major")}
            if "minor" in attrs:
                version["minor"] = attrs["minor"].strip()
            out[tag] = version
        else:
            raise doc.unknown(child)
        doc.leaf(child)
    for needed in (*_DISTRO_URLS, "arch", "osversion"):
        if needed not in out:
            raise doc.error(el, f"<distro> needs <{needed}>")
    return out


def _kickstart(doc: XmlDoc, el: etree._Element) -> str:
    doc.attributes(el, ())
    return doc.text(el)


EXTRAS: Final[dict[str, Callable[[XmlDoc, etree._Element], Any]]] = {
    "watchdog": _watchdog,
    "reservesys": _reservesys,
    "autopick": _autopick,
    "packages": _packages,
    "repos": _repos,
    "ks_appends": _ks_appends,
    "partitions": _partitions,
    "kickstart": _kickstart,
}


def integer(doc: XmlDoc, el: etree._Element, name: str, text: str, *, least: int = 0) -> int:
    """A whole-number attribute, at least ``least``."""
    if not _DIGITS.fullmatch(text.strip()):
        shown = text if len(text) <= 40 else f"{text[:20]}…"
        raise doc.error(
            el, f"{name} on <{el.tag}> must be a whole number (18 digits at most), not {shown!r}"
        )
    value = int(text)
    if value < least:
        raise doc.error(el, f"{name} on <{el.tag}> must be at least {least}, not {value}")
    return value
