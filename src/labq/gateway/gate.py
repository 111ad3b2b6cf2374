"""How many large job documents the server parses at once.

Parsing is CPU work under Python's GIL: four 1 MB documents parsed at once on
worker threads slowed ``/api/v1/health`` and every small submission to their
pace. Documents past ``large`` bytes take one of ``slots`` turns (the others
wait, asleep); the small ones every user sends are never held up by them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

LARGE: Final = 64 * 1024  # real job documents are a few kilobytes


class DocumentGate:
    """At most ``slots`` documents of ``large`` bytes or more parsed at a time."""

    def __init__(self, slots: int = 1, large: int = LARGE) -> None:
        self._turns = threading.BoundedSemaphore(slots)
        self.large = large

    @contextmanager
    def turn(self, size: int) -> Iterator[None]:
        """Wait for a turn if a document of ``size`` bytes is large; hold it meanwhile."""
        if size < self.large:
            yield
            return
        with self._turns:
            yield
