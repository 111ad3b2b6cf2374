"""Distro trees in a lab's catalogue, and what a recipe asks of one.

A **tree** is something a lab can install: a Beaker-style tree read from its
``.treeinfo`` (family, version, variant, arch, kernel, initrd, repositories) or a
Teuthology-style image (os type and version, for some machine types). A recipe's
**distro requirement** is a condition over a tree's facts, in the native
requirement form of :mod:`labq.domain.requirements` and evaluated by it:
Beaker's ``<distroRequires>`` (``family``, ``name``, ``variant``, ``arch``,
``tag``, ``method``, ``labcontroller``) and Teuthology's ``os_type``/``os_version``
both land in the recipe's metadata under :data:`REQUIREMENT_KEY`. A custom
``<distro>`` names its own tree and needs none from the catalogue.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, Final
from urllib.parse import urljoin

from labq.domain import requirements
from labq.domain.requirements import AllOf, AnyOf, Compare, Fact, Negation, Requirement, Some

# the recipe metadata key holding the canonical requirement (native form); the formats
# write it, the store keeps it with the recipe, the scheduler reads it with requirement_of
REQUIREMENT_KEY: Final = "distro_requires"
CUSTOM_KEY: Final = "distro"  # a custom <distro>: the recipe's own tree
KINDS: Final = ("tree", "image")

# product family (as .treeinfo spells it) -> Teuthology's os_type; the Beaker family
# (OSMajor) is the product without spaces and the major version: RedHatEnterpriseLinux9
_OS_TYPES: Final = {
    "red hat enterprise linux": "rhel",
    "centos stream": "centos",
    "centos linux": "centos",
    "centos": "centos",
    "fedora": "fedora",
    "rocky linux": "rocky",
    "rocky": "rocky",
    "almalinux": "alma",
    "oracle linux": "ol",
}
# and back, for images added by os type alone
_PRODUCTS: Final = {
    "rhel": "RedHatEnterpriseLinux",
    "centos": "CentOS",
    "fedora": "Fedora",
    "rocky": "Rocky",
    "alma": "AlmaLinux",
    "ubuntu": "Ubuntu",
    "debian": "Debian",
    "opensuse": "openSUSE",
    "sle": "SLES",
}
_PIECES = re.compile(r"(\d+)|(\D+)")


@dataclass(frozen=True)
class DistroTree:
    """One tree or image of one lab, for one arch; ``(lab, name, arch)`` names it."""

    lab: str
    name: str
    arch: str
    family: str = ""  # Beaker's OSMajor: RedHatEnterpriseLinux9, CentOSStream9, Fedora39
    version: str = ""  # "9.3", "22.04", "9" (CentOS Stream)
    variant: str = ""  # BaseOS, Server, ... ("" for images)
    kind: str = "tree"  # "tree" (kernel+initrd+repos) or "image"
    url: str = ""  # where the tree lives (its root), "" for images
    kernel: str = ""  # absolute URL or path
    initrd: str = ""
    repos: tuple[tuple[str, str], ...] = ()  # (name, absolute URL)
    tags: frozenset[str] = frozenset()
    machine_types: frozenset[str] = frozenset()  # an image for these only (empty: any)
    os_type: str = ""  # Teuthology's: rhel, centos, ubuntu, ...
    os_version: str = ""  # Teuthology's: 9.3, 9.stream, 22.04
    added_at: datetime | None = field(default=None, compare=False)

    @property
    def key(self) -> tuple[str, str, str]:
        """What names the tree in its lab's catalogue."""
        return (self.lab, self.name, self.arch)

    @cached_property
    def _facts(self) -> dict[str, Fact]:
        major, _, minor = self.version.partition(".")
        method = self.url.partition("://")[0] if "://" in self.url else ""
        facts: dict[str, Fact] = {
            "lab": self.lab,
            "labcontroller": self.lab,
            "name": self.name,
            "arch": self.arch,
            "family": self.family,
            "osmajor": self.family,
            "version": self.version,
            "osminor": minor,
            "major": major,
            "variant": self.variant,
            "kind": self.kind,
            "method": method,
            "tag": self.tags,
            "machine_type": self.machine_types,
            "os_type": self.os_type,
            "os_version": self.os_version,
        }
        return facts

    def facts(self) -> Mapping[str, Fact]:
        """The facts a distro requirement reads (empty text is no value, as for systems)."""
        return self._facts

    def fits(self, arch: str, machine_type: str | None = None) -> bool:
        """Whether the tree installs on a system of this arch (and machine type, for an
        image made for some machine types only)."""
        if self.arch != arch:
            return False
        return not self.machine_types or machine_type in self.machine_types


@dataclass(frozen=True)
class DistroRequirement:
    """A condition over a tree's facts. Equal and hashed by ``key`` alone (the canonical
    text of the condition), so it is a cheap key for memoising :meth:`admits`."""

    key: str
    expr: Requirement = field(compare=False, repr=False)

    @classmethod
    def of(cls, native: object, path: str = REQUIREMENT_KEY) -> DistroRequirement:
        """From the native form; raises RequirementError naming ``path`` when unreadable."""
        expr = requirements.parse(native, path)
        return cls(requirements.signature(expr), expr)

    def admits(self, tree: DistroTree) -> bool:
        """Whether ``tree`` satisfies the condition (its arch is not checked here)."""
        return requirements.matches(self.expr, tree.facts())

    def describe(self) -> str:
        """One line: ``family=RedHatEnterpriseLinux9 variant=BaseOS arch=aarch64``."""
        return _describe(self.expr, top=True) or "any tree"

    def native(self) -> dict[str, Any]:
        """The native mapping (what the recipe's metadata keeps)."""
        return requirements.to_native(self.expr)


def requirement_of(metadata: Mapping[str, Any] | None) -> DistroRequirement | None:
    """A recipe's distro requirement from its metadata; None when it names no catalogue
    tree (no distro at all, or a custom ``<distro>`` that brings its own)."""
    if not metadata or REQUIREMENT_KEY not in metadata:
        return None
    return DistroRequirement.of(metadata[REQUIREMENT_KEY])


def teuthology_requirement(os_type: object, os_version: object) -> dict[str, Any] | None:
    """The native requirement for a Teuthology job's ``os_type``/``os_version``."""
    out: dict[str, Any] = {}
    if os_type not in (None, ""):
        out["os_type"] = str(os_type)
    if os_version not in (None, ""):
        out["os_version"] = str(os_version)
    return out or None


def choose_tree(
    trees: Iterable[DistroTree],
    requirement: DistroRequirement | None,
    arch: str,
    machine_type: str | None = None,
) -> DistroTree | None:
    """The newest tree that fits a system of ``arch`` and that the requirement admits
    (newest by when it was added, then by version); None when none does."""
    if requirement is None:
        return None
    fitting = [t for t in trees if t.fits(arch, machine_type) and requirement.admits(t)]
    return max(fitting, key=_newness, default=None)


def custom_tree(metadata: Mapping[str, Any] | None, lab: str = "") -> DistroTree | None:
    """The tree a custom ``<distro>`` names (URLs already absolute where given so)."""
    raw = (metadata or {}).get(CUSTOM_KEY)
    if not isinstance(raw, Mapping):
        return None
    given = raw.get("osversion")
    version: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    family, minor = str(version.get("major", "")), str(version.get("minor", ""))
    number = re.search(r"(\d+)$", family)  # Beaker's major is the OSMajor: Fedora39
    major = number.group(1) if number else ""
    url = str(raw.get("tree", ""))
    return DistroTree(
        lab=lab,
        name=str(raw.get("name", "") or url),
        arch=str(raw.get("arch", "")),
        family=family,
        version=f"{major}.{minor}" if major and minor else major,
        variant=str(raw.get("variant", "")),
        url=url,
        kernel=urljoin(url, str(raw.get("kernel", ""))),  # relative to the tree, as in Beaker
        initrd=urljoin(url, str(raw.get("initrd", ""))),
        repos=(("tree", url),) if url else (),
    )


def os_of(product: str, version: str) -> tuple[str, str]:
    """Teuthology's ``(os_type, os_version)`` for a product family and version as a
    ``.treeinfo`` gives them: ("Red Hat Enterprise Linux", "9.3") -> ("rhel", "9.3"),
    ("CentOS Stream", "9") -> ("centos", "9.stream"); ("", "") for an unknown product."""
    os_type = _OS_TYPES.get(" ".join(product.lower().split()), "")
    if not os_type:
        return ("", "")
    if "stream" in product.lower():
        return (os_type, f"{version.partition('.')[0]}.stream")
    return (os_type, version)


def family_of(product: str, version: str) -> str:
    """Beaker's family (OSMajor) for a product and version: RedHatEnterpriseLinux9."""
    major = version.partition(".")[0]
    return "".join(product.split()) + major


def family_for_os(os_type: str, os_version: str) -> str:
    """A Beaker family for an image known by Teuthology's names: rhel/9.3 ->
    RedHatEnterpriseLinux9, centos/9.stream -> CentOSStream9, ubuntu/22.04 -> Ubuntu22."""
    product = _PRODUCTS.get(os_type, os_type.capitalize())
    major, _, rest = os_version.partition(".")
    return f"{product}Stream{major}" if rest == "stream" else f"{product}{major}"


def version_key(version: str) -> tuple[tuple[int, str], ...]:
    """A sort key that orders 9.10 after 9.9."""
    return tuple((int(d), "") if d else (-1, s) for d, s in _PIECES.findall(version))


def _newness(tree: DistroTree) -> tuple[float, tuple[tuple[int, str], ...], str]:
    added = tree.added_at.timestamp() if tree.added_at is not None else 0.0
    return (added, version_key(tree.version), tree.name)


def _describe(req: Requirement, *, top: bool = False) -> str:
    if isinstance(req, Compare):
        op = "=" if req.op == "=" else f" {req.op} "
        return f"{req.prop}{op}{req.value}"
    if isinstance(req, Negation):
        return f"not({_describe(req.term)})"
    if isinstance(req, Some):
        return f"{req.collection}({_describe(req.term)})"
    if isinstance(req, AnyOf):
        return "(" + " or ".join(_describe(t) for t in req.terms) + ")"
    assert isinstance(req, AllOf)
    inner = " ".join(_describe(t) for t in req.terms)
    return inner if top or len(req.terms) < 2 else f"({inner})"
