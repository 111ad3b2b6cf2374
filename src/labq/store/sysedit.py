"""Editing a system (lab, arch, attributes, pools) and removing it, every change logged.

A removed system keeps its row and its usage history: its condition becomes
``removed``, which the scheduler reads as "gone" (never offered, never waited
for). One that serves a recipe is removed only by force: a set not started yet
lets it go (the scheduler places the set elsewhere), a started one is asked to
stop and ends aborted, so the retry rules apply.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import or_, select, update

from labq.domain.requirements import Scalar
from labq.domain.states import Condition
from labq.domain.stops import abort_reason
from labq.errors import ConflictError
from labq.store.access import AccessStore
from labq.store.base import Db
from labq.store.supervisors import SupervisorStore
from labq.store.systems import SystemStore
from labq.store.tables import Activity, Recipes, RecipeSets, Systems
from labq.store.views import ActivityEntry


class Removal(NamedTuple):
    """What removing a system did: whether it changed, and the set it stopped, if any."""

    changed: bool
    recipe: int | None = None
    stopped_set: int | None = None


class SystemEditStore:
    """Changes to what a system is and where it belongs."""

    def __init__(
        self, db: Db, access: AccessStore, systems: SystemStore, supervisors: SupervisorStore
    ) -> None:
        self.db = db
        self.conn = db.conn
        self.access = access
        self.systems = systems
        self.supervisors = supervisors

    def edit_system(
        self,
        fqdn: str,
        *,
        actor: str,
        now: datetime,
        lab: str | None = None,
        arch: str | None = None,
        attributes: Mapping[str, Scalar | None] | None = None,
        add_pools: Iterable[str] = (),
        remove_pools: Iterable[str] = (),
    ) -> list[str]:
        """Change a system; returns what changed (``lab``, ``arch``, ``attributes``, ``pools``).

        ``attributes`` is merged (a ``None`` value deletes its key). A system that holds
        a recipe keeps its lab: a set runs in one lab.
        """
        changed: list[str] = []
        with self.db.atomic():
            seen = self.systems.get_system(fqdn)
            state = self.db.system_by_fqdn(fqdn)
            if lab is not None and lab != seen.lab:
                if seen.recipe is not None:
                    raise ConflictError(
                        f"{fqdn} serves recipe {seen.recipe}: it moves to another lab once free"
                    )
                self._update(state.id, [Systems.recipe_id.is_(None)], lab_id=self.db.lab_id(lab))
                self.db.log(now, actor, "system", "lab", object_id=state.id, name=fqdn,
                          old=seen.lab, new=lab)  # fmt: skip
                changed.append("lab")
            if arch is not None and arch != seen.arch:
                self._update(state.id, [], arch=arch)
                self.db.log(now, actor, "system", "arch", object_id=state.id, name=fqdn,
                          old=seen.arch, new=arch)  # fmt: skip
                changed.append("arch")
            if attributes:
                merged = dict(seen.attributes)
                for key, value in attributes.items():
                    if value is None:
                        merged.pop(key, None)
                    else:
                        merged[key] = value
                if merged != seen.attributes:
                    self._update(state.id, [], attributes=merged)
                    self.db.log(now, actor, "system", "attributes", object_id=state.id, name=fqdn,
                              old=_text(seen.attributes), new=_text(merged))  # fmt: skip
                    changed.append("attributes")
            moved = [self.access.add_to_pool(fqdn, p, actor=actor, now=now) for p in add_pools]
            moved += [
                self.access.remove_from_pool(fqdn, p, actor=actor, now=now) for p in remove_pools
            ]
            if any(moved):
                changed.append("pools")
        return changed

    def remove_system(
        self,
        fqdn: str,
        *,
        actor: str,
        now: datetime,
        force: bool = False,
        reason: str | None = None,
    ) -> Removal:
        """Mark a system ``removed``; refused while it serves a recipe unless ``force``."""
        with self.db.atomic():
            seen = self.db.system_by_fqdn(fqdn)
            if seen.condition is Condition.REMOVED:
                return Removal(False)
            recipe = seen.recipe_id
            stopped = None
            if recipe is not None:
                set_id, started = self._set_of(recipe)
                if not force:
                    raise ConflictError(
                        f"{fqdn} serves recipe {recipe} (set {set_id}): "
                        "remove it with --force to abort that recipe"
                    )
                if started and self.supervisors.request_stop(
                    set_id, abort_reason(f"its system {fqdn} was removed by {actor}")
                ):
                    stopped = set_id
            why = reason or "removed"
            self.systems.set_condition(fqdn, Condition.REMOVED, now=now, actor=actor, reason=why)
        return Removal(True, recipe, stopped)

    def system_changes(self, fqdn: str, limit: int = 200) -> list[ActivityEntry]:
        """The activity log's entries about one system, oldest first."""
        system_id = self.db.system_by_fqdn(fqdn).id
        stmt = (
            select(Activity)
            .where(
                Activity.object_kind == "system",
                or_(Activity.object_id == system_id, Activity.object_name == fqdn),
            )
            .order_by(Activity.at.desc(), Activity.id.desc())
            .limit(limit)
        )
        rows = list(self.conn.execute(stmt))
        return [
            ActivityEntry(
                at=r.at,
                actor=r.actor,
                object_kind=r.object_kind,
                object_id=r.object_id,
                object_name=r.object_name,
                action=r.action,
                old_value=r.old_value,
                new_value=r.new_value,
                reason=r.reason,
            )
            for r in reversed(rows)
        ]

    def _update(self, system_id: int, guard: list[object], **values: object) -> None:
        stmt = update(Systems).where(Systems.id == system_id, *guard).values(**values)  # type: ignore[arg-type]
        if self.conn.execute(stmt).rowcount != 1:
            raise ConflictError("the system changed meanwhile: try again")

    def _set_of(self, recipe_id: int) -> tuple[int, bool]:
        row = self.conn.execute(
            select(RecipeSets.id, RecipeSets.started_at)
            .join(Recipes, Recipes.recipe_set_id == RecipeSets.id)
            .where(Recipes.id == recipe_id)
        ).one()
        return row.id, row.started_at is not None


def _text(attributes: Mapping[str, object]) -> str:
    return json.dumps(attributes, sort_keys=True)
