"""Beaker's ``<reservesys>``: whether a recipe keeps its system after its tasks, and how long.

The reader keeps the element as recipe metadata (``reservesys: {duration, when}``;
a native job writes the same mapping). Beaker's rules: ``always`` (the default)
reserves whatever the outcome; ``onabort`` when the recipe aborted; ``onfail``
when it failed or aborted; ``onwarn`` when it warned, failed or aborted. A
cancelled recipe keeps nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from labq.domain.states import RecipeState, Result

DEFAULT_SECONDS: Final = 86_400  # Beaker's default duration: a day
MAX_SECONDS: Final = 99 * 86_400  # Beaker's watchdog-extend ceiling, as a sanity limit

_BAD: Final[Mapping[str, frozenset[Result]]] = {
    "always": frozenset({Result.PASS, Result.WARN, Result.FAIL}),
    "onabort": frozenset(),
    "onfail": frozenset({Result.FAIL}),
    "onwarn": frozenset({Result.WARN, Result.FAIL}),
}


def reserve_for(
    metadata: Mapping[str, Any], state: RecipeState, result: Result | None
) -> int | None:
    """Seconds an ended recipe keeps its system for its owner; None: it keeps nothing."""
    wanted = metadata.get("reservesys")
    if not isinstance(wanted, Mapping) or state is RecipeState.CANCELLED:
        return None
    when = wanted.get("when", "always")
    if when not in _BAD:
        return None
    if when != "always" and state is not RecipeState.ABORTED and result not in _BAD[when]:
        return None
    return _duration(wanted)


def may_keep(metadata: Mapping[str, Any] | None) -> int:
    """Seconds a recipe may keep its system once it ends, whatever its outcome (0: none).

    The core plans a set's systems as busy for its run and this long after it
    (``SetEntry.kept``): a set that reserves its systems must not backfill onto
    a holder's system it would keep past the holder's start.
    """
    wanted = None if metadata is None else metadata.get("reservesys")
    if not isinstance(wanted, Mapping) or wanted.get("when", "always") not in _BAD:
        return 0
    return _duration(wanted)


def _duration(wanted: Mapping[str, Any]) -> int:
    duration = wanted.get("duration", DEFAULT_SECONDS)
    if isinstance(duration, bool) or not isinstance(duration, int) or duration < 1:
        duration = DEFAULT_SECONDS
    return int(min(duration, MAX_SECONDS))
