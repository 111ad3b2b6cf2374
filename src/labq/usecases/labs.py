"""Labs: everyone lists them; admins add them."""

from __future__ import annotations

from datetime import datetime

from labq.domain.model import User
from labq.store import Repository
from labq.usecases.permissions import require_admin


def add_lab(repo: Repository, caller: User, name: str, *, now: datetime) -> int:
    """Add a lab (admins); returns its id."""
    require_admin(caller)
    return repo.systems.add_lab(name, actor=caller.name, now=now)
