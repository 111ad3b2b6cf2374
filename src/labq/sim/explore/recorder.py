"""The core behind the simulator's policy interface, keeping every call and its decisions
(the checks read the decisions of one event; a replayed scenario is compared call for call)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence

from labq.domain.distro import DistroTree
from labq.domain.locktable import Grant
from labq.domain.priority import Priority
from labq.domain.states import Condition, RecipeState
from labq.scheduler import decisions as d
from labq.scheduler.core import Scheduler
from labq.scheduler.entries import SetSubmission, SystemEntry

Call = tuple[str, tuple[Hashable, ...], float, tuple[d.Decision, ...]]  # method, args, now, out


class Recorder:
    """The core behind the simulator's policy interface, keeping every call and its decisions."""

    name = "labq"
    polls = False

    def __init__(self, core: Scheduler) -> None:
        self.core = core
        self.log: list[Call] = []

    def _note(
        self, method: str, args: tuple[Hashable, ...], now: float, out: list[d.Decision]
    ) -> list[d.Decision]:
        self.log.append((method, args, now, tuple(out)))
        return out

    def add_system(self, system: SystemEntry, now: float) -> list[d.Decision]:
        return self._note("add_system", (system.fqdn,), now, self.core.add_system(system, now))

    def change_condition(self, fqdn: str, condition: Condition, now: float) -> list[d.Decision]:
        out = self.core.change_condition(fqdn, condition, now)
        return self._note("change_condition", (fqdn, condition.value), now, out)

    def submit(self, sets: Sequence[SetSubmission], now: float) -> list[d.Decision]:
        return self._note("submit", tuple(s.id for s in sets), now, self.core.submit(sets, now))

    def started(self, set_id: int, now: float) -> list[d.Decision]:
        return self._note("started", (set_id,), now, self.core.started(set_id, now))

    def finish(
        self, set_id: int, outcomes: Mapping[int, RecipeState], now: float
    ) -> list[d.Decision]:
        states = tuple(sorted((r, s.value) for r, s in outcomes.items()))
        return self._note("finish", (set_id, states), now, self.core.finish(set_id, outcomes, now))

    def cancel(self, set_ids: Iterable[int], now: float) -> list[d.Decision]:
        ids = tuple(set_ids)
        return self._note("cancel", ids, now, self.core.cancel(ids, now))

    def change_priority(
        self, set_ids: Iterable[int], priority: Priority, now: float
    ) -> list[d.Decision]:
        ids = tuple(set_ids)
        out = self.core.change_priority(ids, priority, now)
        return self._note("change_priority", (*ids, priority.name), now, out)

    def locks_held(
        self, set_id: int, grants: Sequence[Grant] | None, now: float
    ) -> list[d.Decision]:
        held = None if grants is None else tuple(grants)
        return self._note(
            "locks_held", (set_id, held), now, self.core.locks_held(set_id, grants, now)
        )

    def hold_system(self, fqdn: str, person: str, now: float) -> list[d.Decision]:
        out = self.core.hold_system(fqdn, person, now)
        return self._note("hold_system", (fqdn, person), now, out)

    def release_system(self, fqdn: str, now: float) -> list[d.Decision]:
        return self._note("release_system", (fqdn,), now, self.core.release_system(fqdn, now))

    def pause_lab(self, lab: str, now: float) -> list[d.Decision]:
        return self._note("pause_lab", (lab,), now, self.core.pause_lab(lab, now))

    def resume_lab(self, lab: str, now: float) -> list[d.Decision]:
        return self._note("resume_lab", (lab,), now, self.core.resume_lab(lab, now))

    def set_trees(self, lab: str, trees: Iterable[DistroTree], now: float) -> list[d.Decision]:
        carried = tuple(trees)
        names = tuple(sorted(f"{t.name}/{t.arch}" for t in carried))
        return self._note("set_trees", (lab, names), now, self.core.set_trees(lab, carried, now))

    def consistency_pass(self, now: float) -> list[d.Decision]:
        return self._note("consistency_pass", (), now, self.core.consistency_pass(now))

    def tick(self, now: float) -> list[d.Decision]:
        return []
