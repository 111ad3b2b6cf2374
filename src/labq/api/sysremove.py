"""``POST /systems/{fqdn}/remove``: take a system out of service for good (admins).

Its row and history stay (condition ``removed``); one that serves a recipe is
removed only with ``force``, which aborts that recipe (see ``labq.store.sysedit``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from labq.api.deps import AdminDep, StateDep
from labq.api.events import tell
from labq.api.openapi import answers
from labq.api.schemas import Body, Reason
from labq.store import transaction

router = APIRouter(prefix="/systems", tags=["systems"])


class RemoveBody(Body):
    """Whether to abort the recipe it serves, and why it goes."""

    force: bool = False
    reason: Reason | None = None


@router.post("/{fqdn}/remove", responses=answers(404, 409))
def remove_system(
    fqdn: str, state: StateDep, admin: AdminDep, body: RemoveBody | None = None
) -> dict[str, Any]:
    """Mark a system removed (admins); 409 while it serves a recipe, unless ``force``."""
    asked = body or RemoveBody()
    with transaction(state.engine) as repo:
        done = repo.system_edits.remove_system(
            fqdn, actor=admin.name, now=state.clock(), force=asked.force, reason=asked.reason
        )
        system = repo.systems.get_system(fqdn)
    if done.changed:
        tell(lambda: state.events.condition_changed(fqdn))
    return {
        "fqdn": fqdn,
        "changed": done.changed,
        "condition": system.condition.value,
        "recipe": done.recipe,
        "aborted_set": done.stopped_set,
    }
