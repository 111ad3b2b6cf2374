"""Lock declarations per level (seed 004, Ganeti's predictive queue).

A recipe set declares, for each lock level, what it will need: nothing, a known
list of names shared or exclusive, an unknown number of names, or every name on
that level. ``whole_lab`` is the Big Ganeti Lock: everything, exclusively.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

DEFAULT_LEVELS: Final = ("lab", "pool", "system", "network", "storage")
WHOLE_LAB: Final = "whole_lab"


class LockKind(enum.Enum):
    """The seven kinds of declaration of the seed's contention table."""

    NONE = "none"
    SHARED = "shared"
    UNKNOWN_SHARED = "unknown_shared"
    ALL_SHARED = "all_shared"
    EXCLUSIVE = "exclusive"
    UNKNOWN_EXCLUSIVE = "unknown_exclusive"
    ALL_EXCLUSIVE = "all_exclusive"


@dataclass(frozen=True)
class LockDecl:
    """What a set needs on one level; ``names`` only for SHARED and EXCLUSIVE."""

    kind: LockKind
    names: frozenset[str] = field(default_factory=frozenset)

    def to_native(self) -> object:
        """The native job-file form of this declaration."""
        if self.kind is LockKind.NONE:
            return "none"
        mode, _, scope = self.kind.value.partition("_")
        if self.kind in (LockKind.SHARED, LockKind.EXCLUSIVE):
            return {mode: sorted(self.names)}
        # kind values read "unknown_shared", "all_exclusive": scope first
        return {scope: mode}


NO_LOCK: Final = LockDecl(LockKind.NONE)


class LockError(ValueError):
    """A lock declaration that cannot be read; ``path`` is inside ``locks``."""

    def __init__(self, path: str, problem: str):
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}" if path else problem)


def parse_decl(raw: object, path: str) -> LockDecl:
    """Read one level's declaration.

    Forms: ``none``; ``{shared: [names]}``, ``{exclusive: [names]}``;
    ``{shared: unknown}``, ``{exclusive: all}`` and the like.
    """
    if raw is None or raw == "none":
        return NO_LOCK
    if not isinstance(raw, Mapping) or len(raw) != 1:
        raise LockError(path, f"expected 'none', {{shared: …}} or {{exclusive: …}}, got {raw!r}")
    ((mode, value),) = raw.items()
    if mode not in ("shared", "exclusive"):
        raise LockError(path, f"unknown lock mode {mode!r} (expected shared or exclusive)")
    if value in ("unknown", "all"):
        return LockDecl(LockKind[f"{str(value).upper()}_{mode.upper()}"])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(n, str) and n for n in value):
        raise LockError(
            f"{path}.{mode}",
            f"expected a list of resource names, 'unknown' or 'all', got {value!r}",
        )
    return LockDecl(LockKind[mode.upper()], frozenset(value))


def parse_locks(raw: object, levels: tuple[str, ...] = DEFAULT_LEVELS) -> dict[str, Any]:
    """Read a set's ``locks:`` mapping into ``{level: LockDecl, whole_lab: bool}``."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise LockError("", f"expected a mapping of level to declaration, got {raw!r}")
    out: dict[str, Any] = {}
    for level, decl in raw.items():
        if level == WHOLE_LAB:
            if not isinstance(decl, bool):
                raise LockError(WHOLE_LAB, f"expected true or false, got {decl!r}")
            out[WHOLE_LAB] = decl
        elif level in levels:
            parsed = parse_decl(decl, str(level))
            if parsed.kind is not LockKind.NONE:
                out[level] = parsed
        else:
            known = ", ".join((*levels, WHOLE_LAB))
            raise LockError(str(level), f"unknown lock level {level!r} (expected one of {known})")
    return out
