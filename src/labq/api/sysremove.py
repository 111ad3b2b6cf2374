"""``POST /systems/{fqdn}/remove``: take a system out of service for good (admins).

Its row and history stay (condition ``removed``); one that serves a recipe is
removed only with ``force``, which aborts that recipe (see ``labq.store.sysedit``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from labq.api.openapi import answers
from labq.gateway.bodies import RemoveBody
from labq.gateway.deps import AdminDep, StateDep
from labq.gateway.posting import committing
from labq.usecases import systems

router = APIRouter(prefix="/systems", tags=["systems"])


@router.post("/{fqdn}/remove", responses=answers(404, 409))
def remove_system(
    fqdn: str, state: StateDep, admin: AdminDep, body: RemoveBody | None = None
) -> dict[str, Any]:
    """Mark a system removed (admins); 409 while it serves a recipe, unless ``force``."""
    asked = body or RemoveBody()
    with committing(state) as (repo, sink):
        system, done = systems.remove_system(
            repo,
            admin,
            fqdn,
            force=asked.force,
            reason=asked.reason,
            now=state.clock(),
            sink=sink,
        )
    return {
        "fqdn": fqdn,
        "changed": done.changed,
        "condition": system.condition.value,
        "recipe": done.recipe,
        "aborted_set": done.stopped_set,
    }
