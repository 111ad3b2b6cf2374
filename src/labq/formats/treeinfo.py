"""A tree's ``.treeinfo``, as ``beaker-import`` and every Fedora/RHEL/CentOS tree carry it.

Two formats: productmd 1.x (``[header]``, ``[release]``, ``[tree]``,
``[variant-*]``, ``[images-ARCH]``) and the older one (``[general]``,
``[images-ARCH]``). Composes often carry both; productmd wins. Kernel, initrd and
repository paths are relative to the tree and become absolute here (a URL, or a
path under the tree's directory).
"""

from __future__ import annotations

import configparser
import posixpath
import re
from datetime import datetime
from typing import Final
from urllib.parse import urljoin

from labq.domain.distro import DistroTree, family_of, os_of
from labq.errors import InputError

MAX_BYTES: Final = 1 << 20  # real ones are a few kilobytes
MAX_VALUE: Final = 4096
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+:@~-]*$")
_ARCH = re.compile(r"^[A-Za-z0-9_]+$")


def read_treeinfo(
    data: bytes,
    *,
    source: str,
    base: str,
    lab: str,
    now: datetime,
    name: str | None = None,
    tags: frozenset[str] = frozenset(),
) -> DistroTree:
    """The tree a ``.treeinfo`` describes, rooted at ``base`` (a URL or a directory).

    Raises InputError naming ``source`` and the section and key at fault.
    """
    ini = _ini(data, source)
    info = _Info(ini, source)
    productmd = ini.has_section("release") and ini.has_section("tree")
    if productmd:
        product = info.need("release", "name")
        version = info.need("release", "version")
        arch = info.need("tree", "arch")
        short = info.get("release", "short") or "".join(product.split())
        default_name = f"{short}-{version}"
        variant, repos = _variants(info, base)
    else:
        product = info.need("general", "family")
        version = info.need("general", "version")
        arch = info.need("general", "arch")
        default_name = "-".join((info.get("general", "name") or f"{product} {version}").split())
        variant = info.get("general", "variant")
        repository = info.get("general", "repository") or "."
        repos = ((variant or "tree", _join(base, repository)),)
    if not _ARCH.match(arch):
        raise info.error("tree" if productmd else "general", "arch", f"{arch!r} is not an arch")
    images = f"images-{arch}"
    kernel = info.need(images, "kernel")
    initrd = info.need(images, "initrd")
    tree_name = name or default_name
    if not _NAME.match(tree_name) or len(tree_name) > 255:
        raise InputError(
            f"{tree_name!r} is not a tree name (letters, digits, . _ - + : @ ~)",
            source=source,
            place="name",
        )
    os_type, os_version = os_of(product, version)
    return DistroTree(
        lab=lab,
        name=tree_name,
        arch=arch,
        family=family_of(product, version),
        version=version,
        variant=variant,
        kind="tree",
        url=base,
        kernel=_join(base, kernel),
        initrd=_join(base, initrd),
        repos=repos,
        tags=tags,
        os_type=os_type,
        os_version=_two_parts(os_version),
        added_at=now,
    )


def _ini(data: bytes, source: str) -> configparser.RawConfigParser:
    if len(data) > MAX_BYTES:
        raise InputError(
            f"too large: {len(data)} bytes (a .treeinfo has at most {MAX_BYTES})", source=source
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", source=source) from None
    ini = configparser.RawConfigParser(strict=True, interpolation=None)
    try:
        ini.read_string(text, source)
    except configparser.MissingSectionHeaderError as exc:
        raise InputError(
            "not a .treeinfo: no [section] before the first key", source=source, line=exc.lineno
        ) from None
    except (configparser.DuplicateSectionError, configparser.DuplicateOptionError) as exc:
        problem = exc.message.partition("]: ")[2] or exc.message
        raise InputError(problem, source=source, line=exc.lineno) from None
    except configparser.ParsingError as exc:
        line, raw = exc.errors[0]
        shown = str(raw).strip().strip("'").removesuffix("\\n")[:60]
        raise InputError(f"not 'key = value': {shown}", source=source, line=line) from None
    except configparser.Error as exc:
        raise InputError(str(exc).splitlines()[0], source=source) from None
    return ini


class _Info:
    """Reads values with the place of a missing or bad one."""

    def __init__(self, ini: configparser.RawConfigParser, source: str) -> None:
        self.ini = ini
        self.source = source

    def error(self, section: str, key: str, problem: str) -> InputError:
        return InputError(problem, source=self.source, place=f"[{section}] {key}")

    def get(self, section: str, key: str) -> str:
        value = self.ini.get(section, key, fallback="").strip()
        if len(value) > MAX_VALUE:
            raise self.error(section, key, f"longer than {MAX_VALUE} characters")
        if any(ord(c) < 32 for c in value):
            raise self.error(section, key, "has control characters")
        return value

    def need(self, section: str, key: str) -> str:
        if not self.ini.has_section(section):
            raise self.error(section, key, f"missing (no [{section}] section)")
        value = self.get(section, key)
        if not value:
            raise self.error(section, key, "missing")
        return value


def _variants(info: _Info, base: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The tree's own variant (the one whose repository is the tree) and every variant's
    repository, as productmd lists them in ``[tree] variants``."""
    names = [v.strip() for v in info.get("tree", "variants").split(",") if v.strip()]
    repos: list[tuple[str, str]] = []
    own = ""
    for uid in names:
        section = f"variant-{uid}"
        vid = info.get(section, "id") or uid
        repository = info.need(section, "repository")
        repos.append((vid, _join(base, repository)))
        if posixpath.normpath(repository) == "." and not own:
            own = vid
    if not own:
        own = info.get("general", "variant") or (repos[0][0] if repos else "")
    return own, tuple(repos) or (("tree", base),)


def _join(base: str, relative: str) -> str:
    """``relative`` under the tree: a URL joined to the tree's, or a normalised path."""
    if "://" in relative or relative.startswith("/"):
        return relative
    if "://" in base:
        root = base if base.endswith("/") else base + "/"
        return urljoin(root, relative)
    return posixpath.normpath(posixpath.join(base, relative))


def _two_parts(version: str) -> str:
    """Teuthology names RHEL 8.0.0 as 8.0."""
    return ".".join(version.split(".")[:2])
