"""A point seen from outside the core: who holds what, who may use which system, and
reservations worked out with brute-force matchings of its own (the labs are small)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping

from labq.domain.prediction import raised
from labq.domain.priority import Priority
from labq.domain.requirements import matches
from labq.domain.states import Condition
from labq.scheduler import decisions as d
from labq.scheduler.entries import SetEntry, plan_of
from labq.sim.explore.point import Context, Point, recorder
from labq.sim.runs import RecipeRun

Rank = tuple[int, float, int]
Fits = Callable[[RecipeRun, str], bool]  # may this recipe use this system (here, now)?
NEVER = math.inf


class View:
    """One point seen from outside the core."""

    def __init__(self, point: Point, context: Context) -> None:
        self.point = point
        self.world = point.world
        self.core = point.core
        self.now = float(point.now)
        self.calls = recorder(point.world).log
        self.pools = {
            str(p["name"]): p.get("access") for p in context.lab.scenario.get("pools", [])
        }

    # --- helpers -------------------------------------------------------------------------

    def decisions(self) -> Iterable[d.Decision]:
        """The decisions of this event, in order."""
        for _, decision in self.indexed():
            yield decision

    def indexed(self) -> Iterable[tuple[int, d.Decision]]:
        """The decisions of this event with the index of the call that made them."""
        for index, (_, _, _, out) in enumerate(self.calls):
            for decision in out:
                yield index, decision

    def waiting(self) -> list[SetEntry]:
        """Submitted sets that wait and may run (not blocked, throttled or kept for a lock)."""
        return [e for e in self.core.sets.values() if e.waiting and e.eligible]

    def rank(self, entry: SetEntry) -> Rank:
        """The global hold rank: priority, then submitted first, then the lower id (no aging
        within an explored horizon)."""
        return (int(entry.priority), -entry.submitted, -entry.id)

    def cap(self, pools: Iterable[str], group: str | None) -> Priority | None:
        """Seed 002 from the scenario's pool rules: the highest cap of the group on the pools."""
        best: Priority | None = None
        names = list(pools)
        if not names:
            return Priority.URGENT
        for pool in names:
            rules = self.pools.get(pool)
            if rules is None:
                return Priority.URGENT
            caps = [Priority.parse(c) for g, c in rules.items() if g in (group, "everybody")]
            if caps and (best is None or max(caps) > best):
                best = max(caps)
        return best

    def usable(
        self, recipe: RecipeRun, fqdn: str, group: str | None, static: bool, *, trees: bool = True
    ) -> bool:
        """Whether the recipe may run on the system: automated (forced: not removed), meets
        its requirement, not excluded, in a pool its group may use (``static``: but for the
        condition), in a lab that carries its distro tree (``trees``: the trees now)."""
        system = self.core.systems[fqdn]
        if fqdn in recipe.excluded or recipe.force not in (None, fqdn):
            return False
        if not matches(recipe.requirement, system.facts) or self.cap(system.pools, group) is None:
            return False
        if trees and not self.carries(recipe, system.lab, str(system.facts.get("arch", ""))):
            return False
        if static:
            return True
        if recipe.force is not None:
            return system.condition is not Condition.REMOVED
        return system.condition is Condition.AUTOMATED

    def carries(self, recipe: RecipeRun, lab: str, arch: str) -> bool:
        """Whether the lab carries a tree the recipe's distro requirement admits for the arch
        (any lab, while no lab carries a tree at all)."""
        trees = self.world.trees
        if recipe.distro is None or not any(trees.values()):
            return True
        return any(t.fits(arch) and recipe.distro.admits(t) for t in trees.get(lab, ()))

    def now_usable(self, recipe: RecipeRun, fqdn: str, entry: SetEntry) -> bool:
        return self.usable(recipe, fqdn, entry.group, False)

    def matchings(self, entry: SetEntry, lab: str, fits: Fits) -> Iterable[dict[str, str]]:
        """Every placement of the set's recipes on distinct systems of ``lab`` that ``fits``
        allows, as system -> recipe id (brute force: the labs are small)."""
        recipes = [self.world.recipes[r.id] for r in entry.recipes]
        systems = sorted(f for f, s in self.core.systems.items() if s.lab == lab)
        for chosen in itertools.permutations(systems, len(recipes)):
            if all(fits(r, f) for r, f in zip(recipes, chosen, strict=True)):
                yield {f: str(r.id) for r, f in zip(recipes, chosen, strict=True)}

    def match(self, holder: SetEntry, lab: str) -> dict[str, str] | None:
        """A placement of the holder on systems usable now that are free, its own, or held by
        lower-ranked holders; None if there is none."""

        def fits(recipe: RecipeRun, fqdn: str) -> bool:
            system = self.core.systems[fqdn]
            owner = None if system.recipe is None else self.core.recipes[system.recipe].set_id
            idle = owner is None or not self.core.sets[owner].started
            return (
                idle
                and self.available(fqdn, holder) == self.now
                and self.now_usable(recipe, fqdn, holder)
            )

        return next(iter(self.matchings(holder, lab, fits)), None)

    def could_run(self, entry: SetEntry, lab: str) -> bool:
        """Whether the lab's systems usable now, whatever they do, could run the whole set."""

        def fits(recipe: RecipeRun, fqdn: str) -> bool:
            return self.now_usable(recipe, fqdn, entry)

        return next(iter(self.matchings(entry, lab, fits)), None) is not None

    def available(
        self, fqdn: str, holder: SetEntry | None, freed: frozenset[str] = frozenset()
    ) -> float:
        """When the system is free for ``holder`` at the soonest (EASY's view of the lab)."""
        system = self.core.systems[fqdn]
        if system.recipe is None or fqdn in freed:
            return self.now
        owner = self.core.sets[self.core.recipes[system.recipe].set_id]
        if holder is not None and (
            owner.id == holder.id or (not owner.started and self.rank(owner) < self.rank(holder))
        ):
            return self.now
        if not owner.started or owner.started_at is None:
            return NEVER  # a higher-ranked holder's (or anyone's, for a non-holder)
        plan = self.plan(owner)  # and what its <reservesys> may keep after it
        return NEVER if plan is None else owner.started_at + plan + owner.kept

    def plan(self, entry: SetEntry) -> float | None:
        """The run time the rules plan a set with, worked out apart from the core's planner:
        its max_time, or with predictions its prediction (at most its max_time), raised by
        EASY++'s steps once a running set has outlived it."""
        config = self.core.config
        plan = plan_of(entry.predicted, entry.max_time, config.backfill_on_predictions)
        if plan is None or entry.started_at is None or entry.max_time == plan:
            return plan
        if entry.started_at + plan >= self.now:
            return plan
        return raised(plan, self.now - entry.started_at, entry.max_time, config.prediction_steps)

    def reserved(
        self,
        holder: SetEntry,
        lab: str,
        freed: Iterable[str] = (),
        busy: Mapping[str, float] | None = None,
    ) -> float:
        """The holder's soonest start in ``lab``: the first moment its recipes match systems
        it may use that are free by then (``freed`` count as free now, ``busy`` until then)."""
        gone = frozenset(freed)
        times = {}
        for f, s in self.core.systems.items():
            if s.lab == lab:
                times[f] = self.available(f, holder, gone)
                if busy and f in busy:
                    times[f] = max(times[f], busy[f])
        for moment in sorted({t for t in times.values() if t < NEVER}):

            def ok(recipe: RecipeRun, fqdn: str, at: float = moment) -> bool:
                return times[fqdn] <= at and self.now_usable(recipe, fqdn, holder)

            if next(iter(self.matchings(holder, lab, ok)), None) is not None:
                return moment
        return NEVER

    def delays_any(self, entry: SetEntry, lab: str, placement: Mapping[str, str]) -> bool:
        """Whether starting ``entry`` on ``placement`` now moves any holder's start in ``lab``."""
        plan = self.plan(entry)
        end = NEVER if plan is None else self.now + plan + entry.kept
        busy = dict.fromkeys(placement, end)
        for holder_id in sorted(self.core.holders[lab]):
            holder = self.core.sets[holder_id]
            if self.reserved(holder, lab, busy=busy) > self.reserved(holder, lab):
                return True
        return False

    def describe(self, lab: str) -> str:
        """The lab's systems in a few words."""
        parts = []
        for f, s in sorted(self.core.systems.items()):
            if s.lab != lab:
                continue
            if s.recipe is None:
                parts.append(
                    f"{f} free"
                    if s.condition is Condition.AUTOMATED
                    else f"{f} {s.condition.value}"
                )
            else:
                owner = self.core.sets[self.core.recipes[s.recipe].set_id]
                parts.append(f"{f} {'runs' if owner.started else 'held by'} set {owner.id}")
        return ", ".join(parts)
