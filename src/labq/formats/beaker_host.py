"""Beaker ``<hostRequires>`` and ``<distroRequires>`` as native requirement mappings.

Children of a container hold together (implicit AND); ``<and>``, ``<or>`` and
``<not>`` nest. A leaf such as ``<memory op=">=" value="4096"/>`` becomes one
comparison on a labq system property (``memory_mb``). As in Beaker, an empty
``<and/>``, ``<or/>`` or ``<not/>`` imposes no constraint and is ignored by its
parent, and so is a text leaf with an empty value, except where Beaker reads the
empty value as "none" (``<hypervisor>``, ``<last_inventoried>``). ``<device>`` and
``<disk>`` ask for one item of the system's inventory that has all they say.
``docs/job-format-beaker.md`` has the full table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from lxml import etree

from labq.domain.requirements import Scalar
from labq.formats.xmltree import XmlDoc

Kind = Literal["label", "text", "number", "bool", "any", "date", "bytes"]
Native = dict[str, Any]

BEAKER_OPS: Final = ("=", "==", "!=", "<", "<=", ">", ">=", "like")
_EQUALITY: Final = frozenset({"=", "==", "!=", "like"})
_INTEGER: Final = re.compile(r"^[+-]?\d+$")
_DECIMAL: Final = re.compile(r"^[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?$")
_PROPERTY_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:/-]*$")
_TRUE: Final = frozenset({"true", "1"})
_FALSE: Final = frozenset({"false", "0"})
_DATE: Final = re.compile(r"^\d{4}-\d{2}-\d{2}$")
# Beaker's bytes_units: SI for disks and networks (not for memory)
UNITS: Final = {
    "bytes": 1,
    "B": 1,
    "kB": 1000,
    "KB": 1000,
    "KiB": 1024,
    "MB": 1000**2,
    "MiB": 1024**2,
    "GB": 1000**3,
    "GiB": 1024**3,
    "TB": 1000**4,
    "TiB": 1024**4,
}
_DEVICE_ATTRS: Final = (
    "type",
    "bus",
    "driver",
    "vendor_id",
    "device_id",
    "subsys_vendor_id",
    "subsys_device_id",
    "description",
)


@dataclass(frozen=True)
class Leaf:
    """A leaf element: the labq property it compares and how its value reads.

    ``label`` and ``bool`` take only equality operators (Beaker's ``equality_op``);
    ``number`` values must be numbers; ``any`` turns numeric-looking text into a number;
    ``date`` is ``YYYY-MM-DD``; ``bytes`` is a whole number with optional ``units``.
    ``nullable``: an empty value asks for a system without the property (else a
    text leaf with an empty value is no constraint, as in Beaker).
    """

    prop: str
    kind: Kind
    nullable: bool = False


@dataclass(frozen=True)
class Scope:
    """The elements allowed at one level of a requirement tree."""

    leaves: Mapping[str, Leaf]
    nested: Mapping[str, str] = field(default_factory=dict)  # container -> scope name


_SYSTEM = Scope(
    leaves={
        "name": Leaf("fqdn", "label"),
        "memory": Leaf("memory_mb", "number"),
        "arch": Leaf("arch", "label"),
        "type": Leaf("system_type", "label"),
        "model": Leaf("model", "label"),
        "vendor": Leaf("vendor", "label"),
        "lender": Leaf("lender", "label"),
        "numanodes": Leaf("numa_nodes", "number"),
        "hypervisor": Leaf("hypervisor", "label", nullable=True),
        "owner": Leaf("owner", "label"),
        "location": Leaf("location", "label"),
        "last_inventoried": Leaf("last_inventoried", "date", nullable=True),
        "serial": Leaf("serial", "label"),
        "powertype": Leaf("power_type", "label"),
        "status": Leaf("condition", "label"),  # Automated, Manual, ...: labq's conditions
        "added": Leaf("added", "date"),
        # labq has no reservations or loans by users: attributes an admin may set, else none
        "user": Leaf("user", "label", nullable=True),
        "loaned": Leaf("loaned", "label", nullable=True),
    },
)
_CPU = Scope(
    leaves={
        "processors": Leaf("cpus", "number"),
        "cores": Leaf("cpu_cores", "number"),
        "sockets": Leaf("cpu_sockets", "number"),
        "speed": Leaf("cpu_speed", "number"),
        "vendor": Leaf("cpu_vendor", "label"),
        "model": Leaf("cpu_model", "number"),
        "model_name": Leaf("cpu_model_name", "label"),
        "family": Leaf("cpu_family", "number"),
        "stepping": Leaf("cpu_stepping", "number"),
        "hyper": Leaf("cpu_hyper", "bool"),
        "flag": Leaf("cpu_flag", "label"),
    },
)
_HOST = Scope(
    leaves={
        "hostname": Leaf("fqdn", "label"),
        "host": Leaf("fqdn", "label"),
        "labcontroller": Leaf("lab", "label"),
        "hostlabcontroller": Leaf("lab", "label"),
        "arch": Leaf("arch", "label"),
        "memory": Leaf("memory_mb", "number"),
        "system_type": Leaf("system_type", "label"),
        "pool": Leaf("pool", "label"),
        "cpu_count": Leaf("cpus", "number"),
        "numa_node_count": Leaf("numa_nodes", "number"),
        "hypervisor": Leaf("hypervisor", "label", nullable=True),
        "disk_count": Leaf("disk_count", "number"),
        "disk_space": Leaf("disk_space", "bytes"),
        "group": Leaf("pool", "label", nullable=True),  # Beaker's system groups became pools
    },
    nested={"system": "system", "cpu": "cpu"},
)
_DISK = Scope(
    leaves={
        "model": Leaf("model", "label"),
        "size": Leaf("size", "bytes"),
        "sector_size": Leaf("sector_size", "bytes"),
        "phys_sector_size": Leaf("phys_sector_size", "bytes"),
    },
)
_DISTRO_NAMES: Final = ("family", "name", "tag", "variant", "arch", "method", "labcontroller")
_DISTRO = Scope(
    leaves={
        **{n: Leaf(n, "text") for n in _DISTRO_NAMES},
        **{f"distro_{n}": Leaf(n, "text") for n in _DISTRO_NAMES if n != "labcontroller"},
        "distrolabcontroller": Leaf("labcontroller", "text"),
        "distro_virt": Leaf("virt", "text"),
    },
)
_SCOPES: Final = {
    "host": _HOST,
    "system": _SYSTEM,
    "cpu": _CPU,
    "distro": _DISTRO,
    "disk": _DISK,
}


def host_requirement(doc: XmlDoc, el: etree._Element) -> Native:
    """The native requirement for the children of ``<hostRequires>``."""
    return _conjunction(doc, el, _HOST) or {}


def distro_requirement(doc: XmlDoc, el: etree._Element) -> Native:
    """``<distroRequires>`` in the same mapping form, for recipe metadata."""
    return _conjunction(doc, el, _DISTRO) or {}


def plain_arch(distro: Native) -> str | None:
    """The arch a distro condition asks for outright (not under ``or``/``not``)."""
    arch = distro.get("arch")
    if isinstance(arch, str):
        return arch
    for term in distro.get("and", []):
        found = plain_arch(term)
        if found is not None:
            return found
    return None


def _conjunction(doc: XmlDoc, el: etree._Element, scope: Scope) -> Native | None:
    terms = [t for c in doc.children(el) if (t := _condition(doc, c, scope)) is not None]
    return _combine("and", terms)


def all_of(terms: list[Native]) -> Native:
    """Native terms that must all hold, as one mapping (``{}`` when there are none)."""
    return _combine("and", terms) or {}


def _combine(kind: str, terms: list[Native]) -> Native | None:
    if not terms:
        return None  # Beaker: an empty combiner is no constraint at all
    if len(terms) == 1:
        return terms[0]
    flat: list[Native] = []
    for term in terms:  # (a and (b and c)) is (a and b and c): keep the form flat
        nested = term.get(kind) if len(term) == 1 else None
        flat.extend(nested if isinstance(nested, list) else [term])
    return {kind: flat}


def _condition(doc: XmlDoc, el: etree._Element, scope: Scope) -> Native | None:
    tag = str(el.tag)
    if tag in ("and", "or", "not"):
        doc.attributes(el, ())
        if tag == "or":
            terms = [t for c in doc.children(el) if (t := _condition(doc, c, scope)) is not None]
            return _combine("or", terms)
        inner = _conjunction(doc, el, scope)
        return inner if tag == "and" or inner is None else {"not": inner}
    if tag in scope.nested:
        doc.attributes(el, ())
        return _conjunction(doc, el, _SCOPES[scope.nested[tag]])
    if scope is _HOST and tag in _HOST_SPECIAL:
        return _HOST_SPECIAL[tag](doc, el)
    leaf = scope.leaves.get(tag)
    if leaf is None:
        raise doc.unknown(el)
    return _leaf(doc, el, leaf)


def _leaf(doc: XmlDoc, el: etree._Element, leaf: Leaf) -> Native | None:
    attrs = doc.attributes(
        el, ("op", "value", "units") if leaf.kind == "bytes" else ("op", "value")
    )
    if attrs.get("value") == "" and not leaf.nullable and leaf.kind in ("label", "text", "date"):
        doc.leaf(el)
        return None  # Beaker: a text leaf with no value is no constraint
    if leaf.prop == "condition" and "value" in attrs:
        attrs["value"] = attrs["value"].lower()  # Beaker says Automated, labq automated
    return _compare(doc, el, leaf.prop, leaf.kind, attrs)


def _auto_prov(doc: XmlDoc, el: etree._Element) -> None:
    """Every labq system is provisioned by its lab's backend and hooks: no constraint."""
    doc.attributes(el, ("op", "value"))
    doc.leaf(el)


def _disk(doc: XmlDoc, el: etree._Element) -> Native:
    """One disk that satisfies every child; ``<disk/>``: some disk at all."""
    doc.attributes(el, ())
    return {"disk": _conjunction(doc, el, _DISK) or {}}


def _device(doc: XmlDoc, el: etree._Element) -> Native | None:
    """One device with every attribute given; ``op="!="``: no such device."""
    attrs = doc.attributes(el, ("op", *_DEVICE_ATTRS))
    doc.leaf(el)
    op = attrs.get("op", "=").strip()
    if op not in _EQUALITY:
        raise doc.error(el, f"<device> can only be compared with =, ==, != or like, not {op!r}")
    given = {k: attrs[k] for k in _DEVICE_ATTRS if k in attrs}
    if not given:
        raise doc.error(el, f"<device> needs one of the attributes {', '.join(_DEVICE_ATTRS)}")
    each = "like" if op == "like" else "="
    wanted = {k: v if each == "=" else {each: v} for k, v in given.items() if v != ""}
    if not wanted:
        return None  # Beaker ignores attributes without a value
    found = {"device": wanted}
    return {"not": found} if op == "!=" else found


def _key_value(doc: XmlDoc, el: etree._Element) -> Native:
    attrs = doc.attributes(el, ("key", "op", "value"))
    key = doc.required(el, attrs, "key")
    if key in ("and", "or", "not", "device", "disk") or not _PROPERTY_NAME.match(key):
        raise doc.error(el, f"{key!r} cannot be used as a key_value key")
    return _compare(doc, el, key, "any", attrs)


_HOST_SPECIAL: Final[dict[str, Callable[[XmlDoc, etree._Element], Native | None]]] = {
    "key_value": _key_value,
    "auto_prov": _auto_prov,
    "device": _device,
    "disk": _disk,
}


def _compare(
    doc: XmlDoc, el: etree._Element, prop: str, kind: Kind, attrs: dict[str, str]
) -> Native:
    doc.leaf(el)
    op = attrs.get("op", "=").strip()
    if op not in BEAKER_OPS:
        raise doc.error(
            el, f"unknown operator {op!r} on <{el.tag}> (expected one of {' '.join(BEAKER_OPS)})"
        )
    if (kind in ("label", "bool") and op not in _EQUALITY) or (
        kind in ("bool", "date", "bytes") and op == "like"
    ):
        allowed = "=, ==, != or like" if kind == "label" else "=, ==, !=, <, <=, > or >="
        allowed = "=, == or !=" if kind == "bool" else allowed
        raise doc.error(el, f"<{el.tag}> can only be compared with {allowed}, not {op!r}")
    if "value" not in attrs:
        raise doc.error(el, f"<{el.tag}> needs the attribute value")
    if kind == "bytes":
        value: Scalar = _bytes(doc, el, attrs["value"], attrs.get("units", "bytes"))
    else:
        value = _value(doc, el, kind, op, attrs["value"])
    op = "=" if op == "==" else op
    return {prop: value if op == "=" else {op: value}}


def _value(
    doc: XmlDoc, el: etree._Element, kind: Kind, op: str, text: str
) -> str | int | float | bool:
    if kind == "bool":
        word = text.strip().lower()
        if word in _TRUE | _FALSE:
            return word in _TRUE
        raise doc.error(el, f"<{el.tag}> needs true or false, got {text!r}")
    if kind == "date":
        if text and not _DATE.match(text.strip()):
            raise doc.error(el, f"<{el.tag}> needs a date YYYY-MM-DD (or nothing), got {text!r}")
        return text.strip()
    if kind in ("label", "text") or op == "like":
        return text
    number = _number(text.strip())
    if number is not None:
        return number
    if kind == "number":
        raise doc.error(el, f"<{el.tag}> compares numbers, got {text!r}")
    return text


def _bytes(doc: XmlDoc, el: etree._Element, text: str, units: str) -> int:
    if units not in UNITS:
        raise doc.error(el, f"unknown units {units!r} on <{el.tag}> (known: {' '.join(UNITS)})")
    if not _INTEGER.match(text.strip()):
        raise doc.error(el, f"<{el.tag}> needs a whole number (of {units}), got {text!r}")
    return int(text) * UNITS[units]


def _number(text: str) -> int | float | None:
    if _INTEGER.match(text):
        return int(text)
    if _DECIMAL.match(text):
        return float(text)
    return None
