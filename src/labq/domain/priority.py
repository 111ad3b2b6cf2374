"""Job priorities: ``low < medium < normal < high < urgent``."""

from __future__ import annotations

import enum


class Priority(enum.IntEnum):
    """A nominal or effective priority; larger is more urgent."""

    LOW = 0
    MEDIUM = 1
    NORMAL = 2
    HIGH = 3
    URGENT = 4

    @property
    def label(self) -> str:
        """The lower-case name used in files and on the command line."""
        return self.name.lower()

    @classmethod
    def parse(cls, text: object) -> Priority:
        """Read a priority name, case-insensitively (Beaker writes ``Normal``)."""
        if isinstance(text, Priority):
            return text
        if isinstance(text, str):
            try:
                return cls[text.strip().upper()]
            except KeyError:
                pass
        names = ", ".join(p.label for p in cls)
        raise ValueError(f"unknown priority {text!r} (expected one of {names})")

    def raised(self, levels: int, ceiling: Priority) -> Priority:
        """This priority raised by ``levels`` steps, never above ``ceiling`` nor lowered."""
        if self >= ceiling:
            return self
        return Priority(min(int(self) + max(levels, 0), int(ceiling)))


def effective_priority(nominal: Priority, maximum: Priority | None) -> Priority | None:
    """Seed 002: the lower of the nominal priority and the group's maximum on a system.

    ``maximum`` is None when the group may not use the system at all.
    """
    if maximum is None:
        return None
    return min(nominal, maximum)
