"""How a started set that was asked to stop ends: cancelled, or aborted (and maybe retried).

A stop request is a reason stored on the set (``recipe_sets.stop_reason``). A cancel's
reason ends its recipes ``cancelled``. A reason that begins with ``ABORT_PREFIX`` (a
system removed under a running set, ``labq system remove --force``) ends them
``aborted``, so the retry rules apply as to any other abort.
"""

from __future__ import annotations

import signal
from typing import Final

from labq.domain.states import RecipeState

ABORT_PREFIX: Final = "aborted: "
# The server ended the set because its supervisor went quiet: its recipes end aborted.
QUIET: Final = "the supervisor stopped heart-beating"


def abort_reason(why: str) -> str:
    """The stop reason that ends a set's recipes aborted, saying ``why``."""
    return ABORT_PREFIX + why


def supervisor_ended(code: int | None) -> str:
    """Why the recipes a supervisor left unfinished ended, from its exit status (``code`` as
    ``Popen.returncode`` has it: negative when a signal killed it; None: not known)."""
    if code is None:
        return "the supervisor ended (how is not known) before the recipe ended"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the supervisor was killed (by {name}) before the recipe ended"
    return f"the supervisor exited (code {code}) before the recipe ended"


def stopped_state(stop_reason: str) -> RecipeState:
    """What the unfinished recipes of a set stopped for ``stop_reason`` end as."""
    if stop_reason.startswith(ABORT_PREFIX):
        return RecipeState.ABORTED
    return RecipeState.CANCELLED
