"""What a recipe asks of provisioning, as environment for the lab's reimage hook.

The hook is the lab's own command (``hooks.reimage``); labq does not install
systems itself. It gets the recipe's provisioning metadata whole as JSON
(``LABQ_PROVISION``: a Beaker recipe's ``distro``, ``distro_requires``,
``ks_meta``, kickstart extras, ...) and a custom distro's parts one by one
(``LABQ_DISTRO_TREE``, ``_KERNEL``, ``_INITRD`` as absolute URLs, ``_ARCH``,
``_OSMAJOR``, ``_OSMINOR``, ``_NAME``, ``_VARIANT``) so a shell hook needs no
JSON parser.

A recipe whose distro requirement a tree of the lab's catalogue meets gets that
tree (chosen at dispatch for the system's arch: ``LABQ_DISTRO_NAME``, ``_FAMILY``,
``_VERSION``, ``_VARIANT``, ``_ARCH``, ``_KERNEL``, ``_INITRD``, ``_TREE``,
``_REPOS`` as ``name=url`` lines, ``_OS_TYPE``, ``_OS_VERSION``), and the
kickstart metadata a Beaker recipe carries: ``LABQ_KS_META``,
``LABQ_KERNEL_OPTIONS``, ``LABQ_KERNEL_OPTIONS_POST`` and ``LABQ_KS_APPENDS``
(the ``<ks_append>`` texts, each ended by a line of its own). Nothing secret is
in these: trees and kickstart options are the lab's and the job's public facts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urljoin

from labq.domain.distro import DistroTree

_PLAIN: Final = ("arch", "name", "variant")


_KICKSTART: Final = ("ks_meta", "kernel_options", "kernel_options_post")


def provision_environment(
    metadata: Mapping[str, Any], tree: DistroTree | None = None
) -> dict[str, str]:
    """The variables for the reimage hook of a recipe with this metadata (none when empty),
    and of the catalogue tree chosen for it (None: it named none, or none was found)."""
    if not metadata and tree is None:
        return {}
    out = {"LABQ_PROVISION": json.dumps(metadata, sort_keys=True, separators=(",", ":"))}
    distro = metadata.get("distro")
    if isinstance(distro, Mapping):
        out.update(_custom_distro(distro))
    elif tree is not None:
        out.update(tree_environment(tree))
    for key in _KICKSTART:
        if isinstance(metadata.get(key), str):
            out[f"LABQ_{key.upper()}"] = metadata[key]
    appends = metadata.get("ks_appends")
    if isinstance(appends, list) and appends:
        out["LABQ_KS_APPENDS"] = "".join(f"{a}\n" for a in appends if isinstance(a, str))
    return out


def tree_environment(tree: DistroTree) -> dict[str, str]:
    """A catalogue tree's variables."""
    return {
        "LABQ_DISTRO_NAME": tree.name,
        "LABQ_DISTRO_FAMILY": tree.family,
        "LABQ_DISTRO_VERSION": tree.version,
        "LABQ_DISTRO_VARIANT": tree.variant,
        "LABQ_DISTRO_ARCH": tree.arch,
        "LABQ_DISTRO_KIND": tree.kind,
        "LABQ_DISTRO_TREE": tree.url,
        "LABQ_DISTRO_KERNEL": tree.kernel,
        "LABQ_DISTRO_INITRD": tree.initrd,
        "LABQ_DISTRO_REPOS": "".join(f"{name}={url}\n" for name, url in tree.repos),
        "LABQ_DISTRO_OS_TYPE": tree.os_type,
        "LABQ_DISTRO_OS_VERSION": tree.os_version,
    }


def _custom_distro(distro: Mapping[str, Any]) -> dict[str, str]:
    tree = str(distro.get("tree", ""))
    out = {"LABQ_DISTRO_TREE": tree}
    for part in ("kernel", "initrd"):  # relative to the tree, as Beaker reads them
        if part in distro:
            out[f"LABQ_DISTRO_{part.upper()}"] = urljoin(tree, str(distro[part]))
    for key in _PLAIN:
        if key in distro:
            out[f"LABQ_DISTRO_{key.upper()}"] = str(distro[key])
    version = distro.get("osversion")
    if isinstance(version, Mapping):
        out["LABQ_DISTRO_OSMAJOR"] = str(version.get("major", ""))
        if "minor" in version:
            out["LABQ_DISTRO_OSMINOR"] = str(version["minor"])
    return out
