"""A run: jobs submitted together, counted the way Pulpito's run view counts them."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Final

from labq.domain.states import RecipeState, Result
from labq.errors import InputError

# the columns of a run's counts, in the order pages and tables show them
STATUSES: Final = ("queued", "running", "pass", "fail", "dead")
_WAITING: Final = frozenset({RecipeState.NEW, RecipeState.QUEUED, RecipeState.ASSIGNED})
_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+-]{0,199}$")


def job_status(state: RecipeState, result: Result | None) -> str:
    """Which count a job of this derived state and result falls in.

    Not placed yet is ``queued``; placed and unfinished is ``running``; ended
    ``completed`` is ``pass`` unless a task warned or failed (``fail``); cancelled
    and aborted jobs are ``dead`` (they never gave a verdict).
    """
    if state in _WAITING:
        return "queued"
    if not state.is_final:
        return "running"
    if state is RecipeState.COMPLETED:
        return "pass" if result in (None, Result.PASS) else "fail"
    return "dead"


def count(statuses: Iterable[str]) -> dict[str, int]:
    """Every status with how many jobs have it (zeros included)."""
    found = Counter(statuses)
    return {status: found[status] for status in STATUSES}


def check_name(name: str) -> str:
    """A run name usable in a URL path segment and a shell: refused otherwise."""
    if not _NAME.match(name):
        raise InputError(
            f"a run name is 1-200 letters, digits and . _ : @ + - (starting with a letter"
            f" or digit), not {name!r}",
            place="run",
        )
    return name
