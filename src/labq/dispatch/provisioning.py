"""What a recipe asks of provisioning, as environment for the lab's reimage hook.

The hook is the lab's own command (``hooks.reimage``); labq does not install
systems itself. It gets the recipe's provisioning metadata whole as JSON
(``LABQ_PROVISION``: a Beaker recipe's ``distro``, ``distro_requires``,
``ks_meta``, kickstart extras, ...) and a custom distro's parts one by one
(``LABQ_DISTRO_TREE``, ``_KERNEL``, ``_INITRD`` as absolute URLs, ``_ARCH``,
``_OSMAJOR``, ``_OSMINOR``, ``_NAME``, ``_VARIANT``) so a shell hook needs no
JSON parser.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urljoin

_PLAIN: Final = ("arch", "name", "variant")


def provision_environment(metadata: Mapping[str, Any]) -> dict[str, str]:
    """The variables for the reimage hook of a recipe with this metadata (none when empty)."""
    if not metadata:
        return {}
    out = {"LABQ_PROVISION": json.dumps(metadata, sort_keys=True, separators=(",", ":"))}
    distro = metadata.get("distro")
    if isinstance(distro, Mapping):
        out.update(_custom_distro(distro))
    return out


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
