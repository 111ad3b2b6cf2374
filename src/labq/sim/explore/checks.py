"""The invariants checked in every explored state (docs/scheduling.md § Checked on every
order of events).

They are worked out from the world's sets, the scenario's pool rules and the
core's books with small brute-force matchings of their own, not with the
core's placement, reservation or backfill code, so a broken rule there shows.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from labq.domain.contention import LockNeeds
from labq.domain.locks import LockDecl, LockKind
from labq.domain.states import RecipeState
from labq.scheduler import decisions as d
from labq.scheduler.entries import SetEntry
from labq.sim.explore.point import Context, Point
from labq.sim.explore.view import View
from labq.sim.runs import RecipeRun


@dataclass(frozen=True)
class Violation:
    """A broken invariant: which rule, and what happened, in plain words."""

    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.message}"


def check(before: Mapping[str, frozenset[int]], point: Point, context: Context) -> list[Violation]:
    """Every safety invariant, after one event (``before``: the holders of each lab before it)."""
    if point.error is not None:
        return [Violation("no crash", point.error)]
    view = Rules(point, context)
    found = [*view.one_recipe_per_system(), *view.whole_starts(), *view.excludes()]
    found += [*view.wound_wait(), *view.no_queue_jumping(before), *view.no_idle_fit()]
    found += [*view.pool_caps(), *view.predictive(), *view.vms(context)]
    return found


def holders(point: Point) -> dict[str, frozenset[int]]:
    """The holders of each lab."""
    return {lab: frozenset(ids) for lab, ids in point.core.holders.items()}


def stuck(point: Point, context: Context) -> list[Violation]:
    """Liveness at a quiescent point (nothing runs, nothing is due): every waiting set that
    some lab's usable systems could run whole is a set that will never start."""
    view = Rules(point, context)
    world = point.world
    if world.running() or any(t <= context.lab.end for t, *_ in world._heap):
        return []
    out = []
    for entry in view.waiting():
        labs = [lab for lab in sorted(view.core.free) if view.could_run(entry, lab)]
        if labs:
            out.append(
                Violation(
                    "no deadlock",
                    f"set {entry.id} waits for ever: nothing runs, and {labs[0]} could run it"
                    f" ({view.describe(labs[0])})",
                )
            )
    return out


class Rules(View):
    """The invariants, each a method returning what it found broken."""

    def one_recipe_per_system(self) -> list[Violation]:
        """No system serves two recipes; the core's books agree with the world's ledger."""
        out = []
        seen: dict[str, int] = {}
        for recipe in self.core.recipes.values():
            if recipe.system is None or self.core.sets[recipe.set_id].finished:
                continue
            other = seen.setdefault(recipe.system, recipe.id)
            if other != recipe.id:
                out.append(
                    Violation(
                        "one recipe per system",
                        f"{recipe.system} serves recipes {other} and {recipe.id}",
                    )
                )
            if self.core.systems[recipe.system].recipe != recipe.id:
                out.append(
                    Violation(
                        "one recipe per system",
                        f"recipe {recipe.id} holds"
                        f" {recipe.system}, which says it serves"
                        f" {self.core.systems[recipe.system].recipe}",
                    )
                )
        return out

    def whole_starts(self) -> list[Violation]:
        """A set starts whole, in one lab, on systems it may use; it never loses one after."""
        out = []
        starting = {x.set for x in self.decisions() if isinstance(x, d.Start)}
        started: set[int] = set()
        # a condition changed later in the event: judge by the conditions a system may
        # come back from (the start was checked against the condition of its moment)
        changed = max(
            (i for i, c in enumerate(self.calls) if c[0] == "change_condition"), default=-1
        )
        # a lab's trees changed later in the event: the start had the trees of its moment
        retreed = max((i for i, c in enumerate(self.calls) if c[0] == "set_trees"), default=-1)
        for index, decision in self.indexed():
            if isinstance(decision, d.Start):
                started.add(decision.set)
                entry = self.core.sets[decision.set]
                for recipe in entry.recipes:
                    fqdn = recipe.system
                    if fqdn is None or self.core.systems[fqdn].lab != decision.lab:
                        out.append(
                            Violation(
                                "whole start",
                                f"set {entry.id} started in"
                                f" {decision.lab} with recipe {recipe.id} on {fqdn}",
                            )
                        )
                    elif not self.usable(
                        self.world.recipes[recipe.id],
                        fqdn,
                        entry.group,
                        index < changed,
                        trees=index >= retreed,
                    ):
                        out.append(
                            Violation(
                                "whole start",
                                f"set {entry.id} started with"
                                f" recipe {recipe.id} on {fqdn}, which it may not use",
                            )
                        )
            elif isinstance(decision, d.Release) and (
                decision.set in started
                or (decision.set not in starting and self.world.sets[decision.set].started_at)
            ):
                out.append(
                    Violation(
                        "whole start", f"set {decision.set} lost {decision.system} after it started"
                    )
                )
        return out

    def excludes(self) -> list[Violation]:
        """A recipe (a retry above all) is never given a system it excludes."""
        out = []
        for decision in self.decisions():
            if isinstance(decision, d.Schedule):
                recipe = self.world.recipes[decision.recipe]
                if decision.system in recipe.excluded or recipe.force not in (
                    None,
                    decision.system,
                ):
                    out.append(
                        Violation(
                            "retry elsewhere",
                            f"recipe {recipe.id} of set"
                            f" {decision.set} got {decision.system}, which it"
                            f" excludes ({', '.join(sorted(recipe.excluded))})",
                        )
                    )
            elif isinstance(decision, d.Retry):
                run = self.world.sets[decision.set]
                for index, recipe in enumerate(run.recipes):
                    avoid = decision.excluded.get(index, frozenset())
                    lost = recipe.excluded - avoid
                    if recipe.state is RecipeState.ABORTED and recipe.ran_on is not None:
                        lost |= {recipe.ran_on} - avoid
                    if lost:
                        out.append(
                            Violation(
                                "retry elsewhere",
                                f"the retry of set {run.id}"
                                f" may use {', '.join(sorted(lost))} again for"
                                f" recipe {recipe.id}",
                            )
                        )
        return out

    def wound_wait(self) -> list[Violation]:
        """The best-ranked holder of a lab never waits for systems lower-ranked holders hold:
        if free systems, its own and theirs would do, it has started."""
        out = []
        for lab, ids in sorted(self.core.holders.items()):
            if not ids or not self.core.slot_free(lab):
                continue
            top = max((self.core.sets[i] for i in ids), key=self.rank)
            if self.match(top, lab) is not None:
                out.append(
                    Violation(
                        "holds by global rank",
                        f"set {top.id}, the best-ranked"
                        f" holder of {lab}, could start ({self.describe(lab)})"
                        " but waits",
                    )
                )
        return out

    def no_queue_jumping(self, before: Mapping[str, frozenset[int]]) -> list[Violation]:
        """A set that started did not move a higher-ranked holder's reserved start later."""
        out = []
        for decision in self.decisions():
            if not isinstance(decision, d.Start):
                continue
            started = self.core.sets[decision.set]
            lab = decision.lab
            mine = {r.system for r in started.recipes if r.system is not None}
            for holder_id in sorted(before.get(lab, frozenset()) & self.core.holders[lab]):
                holder = self.core.sets[holder_id]
                if self.rank(holder) <= self.rank(started):
                    continue
                with_it = self.reserved(holder, lab)
                without = self.reserved(holder, lab, freed=mine)
                if with_it > without:
                    out.append(
                        Violation(
                            "no queue jumping",
                            f"set {started.id} started on"
                            f" {', '.join(sorted(mine))} and moved the reserved"
                            f" start of higher-ranked holder {holder.id} from"
                            f" {without:g} to {with_it:g}",
                        )
                    )
        return out

    def no_idle_fit(self) -> list[Violation]:
        """No waiting set that fits the free systems of a lab, delaying no holder there, waits
        (backfill does not leave a system idle that someone could use without harm)."""
        out = []
        for lab in sorted(self.core.free):
            if not self.core.slot_free(lab):
                continue
            free = set(self.core.free[lab])
            for entry in self.waiting():
                if entry.lab is not None or self.core.lock_wait(entry, lab) is not None:
                    continue

                def fits(
                    recipe: RecipeRun, fqdn: str, entry: SetEntry = entry, free: set[str] = free
                ) -> bool:
                    return fqdn in free and self.now_usable(recipe, fqdn, entry)

                for placement in self.matchings(entry, lab, fits):
                    if not self.delays_any(entry, lab, placement):
                        out.append(
                            Violation(
                                "no idle fit",
                                f"set {entry.id} could start on"
                                f" {', '.join(placement)} in {lab} delaying no"
                                " holder, but waits",
                            )
                        )
                        break
        return out

    def vms(self, context: Context) -> list[Violation]:
        """A VM is made only for a recipe no idle physical system of its lab could serve, and
        a lab's VMs (made or promised to a holder) never exceed its provider's quota."""
        out = []
        for decision in self.decisions():
            if not isinstance(decision, d.CreateVm):
                continue
            recipe = self.world.recipes[decision.recipe]
            entry = self.core.sets[decision.set]
            idle = [
                f
                for f in sorted(self.core.free.get(decision.lab, ()))
                if self.core.systems[f].vm is None and self.now_usable(recipe, f, entry)
            ]
            if idle:
                out.append(
                    Violation(
                        "VM only when no machine fits",
                        f"a VM on {decision.system} for recipe {recipe.id} while"
                        f" {', '.join(idle)} idles",
                    )
                )
        for lab, quota in context.lab.scenario.get("vms", {}).items():
            sizes = {s["name"]: s for s in quota["sizes"]}
            used = [
                sizes[system.vm]
                for system in self.core.systems.values()
                if system.lab == lab and system.vm is not None and system.recipe is not None
            ]
            total = (len(used), sum(s["cpus"] for s in used), sum(s["memory"] for s in used))
            limit = (quota["max_vms"], quota["max_vcpus"], quota["max_memory"])
            if any(a > b for a, b in zip(total, limit, strict=True)):
                out.append(Violation("VM quota", f"{lab} has VMs for {total}, over {limit}"))
        return out

    def pool_caps(self) -> list[Violation]:
        """The queue offers a system to groups that may use it, by priority capped by the
        group's highest cap on the system's pools (seed 002)."""
        out = []
        for fqdn, system in sorted(self.core.systems.items()):
            walk = self.core.candidates(system, self.now)
            last: tuple[int, int] | None = None
            try:
                for entry, _ in itertools.islice(walk, 12):
                    if not entry.waiting:
                        continue
                    cap = self.cap(system.pools, entry.group)
                    if cap is None:
                        out.append(
                            Violation(
                                "pool caps",
                                f"{fqdn} offered to set {entry.id},"
                                f" whose group {entry.group} may not use it",
                            )
                        )
                        continue
                    nominal = int(entry.priority)
                    key = (min(nominal, int(cap)), nominal)
                    if last is not None and key > last:
                        out.append(
                            Violation(
                                "pool caps",
                                f"{fqdn} offered to set {entry.id}"
                                f" (effective, nominal {key}) after a set of {last}",
                            )
                        )
                    last = key
            finally:
                walk.close()
        return out

    def predictive(self) -> list[Violation]:
        """A waiting set's static predictive value is the seed's formula over the running
        sets' declarations, from the seed's table — or 0 when no cell gives it a chance of
        waiting (1.5 or 3) and it takes an exclusive lock or was kept for one (labq's rule,
        scheduling.md § The predictive queue)."""
        config = self.core.config
        if not config.predictive:
            return []
        running = [
            r.locks
            for r in self.world.sets.values()
            if r.started_at is not None and r.finished_at is None
        ]
        out = []
        for entry in self.core.sets.values():
            if not entry.waiting or not entry.locks.declares:
                continue
            if entry.locks.whole_lab:
                cells = [3.0]
                expected = config.spv_base + 15.0
            else:
                worst = [
                    max(
                        (_cell(entry.locks.at(level), _held(other, level)) for other in running),
                        default=0.0,
                    )
                    for level in config.lock_levels
                ]
                cells = worst
                expected = config.spv_base + sum(worst)
            if entry.spv == 0.0 and max(cells, default=0.0) < 1.5:
                continue
            if abs(entry.spv - expected) > 1e-9:
                out.append(
                    Violation(
                        "predictive order",
                        f"set {entry.id} weighs spv"
                        f" {entry.spv:g}, the seed's table gives {expected:g}",
                    )
                )
        return out


# Seed 004's table, as the seed prints it: SEED[pending][running]; "named" cells are 3 when
# the two name sets overlap, else the number given.
_KINDS = (
    "none",
    "shared",
    "unknown_shared",
    "all_shared",
    "exclusive",
    "unknown_exclusive",
    "all_exclusive",
)
_ROWS: dict[str, tuple[float | str, ...]] = {
    "none": (0, 0, 0, 0, 0, 0, 0),
    "shared": (0.3, 0, 0, 0, "named 0.3", 1.5, 3),
    "unknown_shared": (0.3, 0.3, 0.3, 0.3, 1.5, 1.5, 3),
    "all_shared": (0.3, 0.3, 0.3, 0.3, 3, 3, 3),
    "exclusive": (0.5, "named 0.5", 1.5, 3, "named 0.5", 1.5, 3),
    "unknown_exclusive": (0.5, 1.5, 1.5, 3, 1.5, 1.5, 3),
    "all_exclusive": (0.5, 3, 3, 3, 3, 3, 3),
}


def _cell(pending: LockDecl, running: LockDecl) -> float:
    value = _ROWS[pending.kind.value][_KINDS.index(running.kind.value)]
    if isinstance(value, str):
        return 3.0 if pending.names & running.names else float(value.split()[1])
    return float(value)


def _held(needs: LockNeeds, level: str) -> LockDecl:
    """What a running set holds on a level (its declaration; a whole-lab set: everything)."""
    return LockDecl(LockKind.ALL_EXCLUSIVE) if needs.whole_lab else needs.at(level)
