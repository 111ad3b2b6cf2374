"""What a system is made of: devices, disks, CPU flags, and when that was last looked at.

An admin sets a system's inventory as one JSON document (``labq system set FQDN
--inventory FILE``); host requirements read it as facts (``device``, ``disk``,
``cpu_flag``, ``disk_count``, ``disk_space``, ``last_inventoried``), with Beaker's
meaning: see ``labq.domain.requirements``. Every key of the document is optional;
an unknown key or a value of the wrong kind is an error, never dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from labq.domain.requirements import Fact, Item, Scalar

DEVICE_FIELDS: Final = (
    "bus",
    "driver",
    "vendor_id",
    "device_id",
    "subsys_vendor_id",
    "subsys_device_id",
    "type",
    "description",
)
DISK_TEXT: Final = ("model",)
DISK_BYTES: Final = ("size", "sector_size", "phys_sector_size")
_KEYS: Final = ("devices", "disks", "cpu_flags", "last_inventoried")
_MAX_ITEMS: Final = 4096
_MAX_TEXT: Final = 1000


class InventoryError(ValueError):
    """An inventory document that cannot be read; ``path`` says where inside it."""

    def __init__(self, path: str, problem: str):
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


@dataclass(frozen=True)
class Inventory:
    """A system's hardware as last inventoried (``None`` fields: never said)."""

    devices: tuple[Item, ...] | None = None
    disks: tuple[Item, ...] | None = None
    cpu_flags: frozenset[str] | None = None
    last_inventoried: str | None = None  # UTC, ``YYYY-MM-DDTHH:MM:SSZ``

    def facts(self) -> dict[str, Fact]:
        """The properties host requirements read; what was never said stays missing."""
        out: dict[str, Fact] = {}
        if self.devices is not None:
            out["device"] = self.devices
        if self.disks is not None:
            out["disk"] = self.disks
            out["disk_count"] = len(self.disks)
            out["disk_space"] = sum(int(d["size"]) for d in self.disks)
        if self.cpu_flags is not None:
            out["cpu_flag"] = self.cpu_flags
        if self.last_inventoried is not None:
            out["last_inventoried"] = self.last_inventoried
        return out

    def to_json(self) -> dict[str, Any]:
        """The document form (what ``parse_inventory`` reads back to an equal value)."""
        out: dict[str, Any] = {}
        if self.devices is not None:
            out["devices"] = [dict(d) for d in self.devices]
        if self.disks is not None:
            out["disks"] = [dict(d) for d in self.disks]
        if self.cpu_flags is not None:
            out["cpu_flags"] = sorted(self.cpu_flags)
        if self.last_inventoried is not None:
            out["last_inventoried"] = self.last_inventoried
        return out


def parse_inventory(raw: object, path: str = "inventory") -> Inventory:
    """Read an inventory document, or raise :class:`InventoryError`."""
    doc = _mapping(raw, path)
    for key in doc:
        if key not in _KEYS:
            raise InventoryError(path, f"unknown key {key!r} (known: {', '.join(_KEYS)})")
    devices = _items(doc.get("devices"), f"{path}.devices", _device)
    disks = _items(doc.get("disks"), f"{path}.disks", _disk)
    flags = doc.get("cpu_flags")
    if flags is not None:
        flags = frozenset(_texts(flags, f"{path}.cpu_flags"))
    when = doc.get("last_inventoried")
    if when is not None:
        when = _timestamp(when, f"{path}.last_inventoried")
    return Inventory(devices, disks, flags, when)


def _mapping(raw: object, path: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise InventoryError(path, f"expected a mapping, got {type(raw).__name__}")
    return raw


def _items(raw: object, path: str, read: Any) -> tuple[Item, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise InventoryError(path, f"expected a list, got {type(raw).__name__}")
    if len(raw) > _MAX_ITEMS:
        raise InventoryError(path, f"at most {_MAX_ITEMS} entries")
    return tuple(read(item, f"{path}[{i}]") for i, item in enumerate(raw))


def _device(raw: object, path: str) -> Item:
    doc = _mapping(raw, path)
    out: dict[str, Scalar] = {}
    for key, value in doc.items():
        if key not in DEVICE_FIELDS:
            raise InventoryError(path, f"unknown device field {key!r}")
        out[key] = _text(value, f"{path}.{key}")
    return out


def _disk(raw: object, path: str) -> Item:
    doc = _mapping(raw, path)
    out: dict[str, Scalar] = {}
    for key, value in doc.items():
        if key in DISK_TEXT:
            out[key] = _text(value, f"{path}.{key}")
        elif key in DISK_BYTES:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InventoryError(f"{path}.{key}", "expected a whole number of bytes")
            out[key] = value
        else:
            raise InventoryError(path, f"unknown disk field {key!r}")
    if "size" not in out:
        raise InventoryError(path, "a disk needs its size (bytes)")
    return out


def _texts(raw: object, path: str) -> list[str]:
    if not isinstance(raw, list):
        raise InventoryError(path, f"expected a list, got {type(raw).__name__}")
    if len(raw) > _MAX_ITEMS:
        raise InventoryError(path, f"at most {_MAX_ITEMS} entries")
    return [_text(v, f"{path}[{i}]") for i, v in enumerate(raw)]


def _text(raw: object, path: str) -> str:
    if not isinstance(raw, str):
        raise InventoryError(path, f"expected text, got {type(raw).__name__}")
    if len(raw) > _MAX_TEXT:
        raise InventoryError(path, f"at most {_MAX_TEXT} characters")
    if "\x00" in raw:
        raise InventoryError(path, "must not contain a NUL character")
    return raw


def _timestamp(raw: object, path: str) -> str:
    """An ISO date or date-time; one without a zone is UTC."""
    if not isinstance(raw, str):
        raise InventoryError(path, f"expected an ISO date-time, got {type(raw).__name__}")
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise InventoryError(path, f"expected an ISO date-time, got {raw!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
