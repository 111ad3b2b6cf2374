"""Property tests of the lifecycle rules, driven through the in-memory Ledger."""

import itertools

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from labq.domain.lifecycle import Ledger
from labq.domain.model import System
from labq.domain.states import MIRRORED_USAGE, RECIPE_MOVES, Condition, RecipeState, Usage
from labq.domain.usage import time_in_usage, utilisation
from labq.errors import IllegalTransition

SYSTEMS = ["s1", "s2", "s3"]


class LedgerMachine(RuleBasedStateMachine):
    """Random moves, legal or not, random condition changes, random time steps."""

    @initialize()
    def start(self):
        self.ledger = Ledger()
        self.now = 0.0
        self.paths: dict[int, list[RecipeState]] = {}
        # the oracle: what each system is doing and since when, kept independently
        self.spent = {s: dict.fromkeys(Usage, 0.0) for s in SYSTEMS}
        self.doing: dict[str, tuple[Usage, float]] = {}
        for fqdn in SYSTEMS:
            self.ledger.add_system(System(fqdn=fqdn, lab="lab1"), self.now)
            self.doing[fqdn] = (self.ledger.systems[fqdn].usage, self.now)

    def _observe(self):
        for fqdn, system in self.ledger.systems.items():
            usage, since = self.doing[fqdn]
            if usage is not system.usage:
                self.spent[fqdn][usage] += self.now - since
                self.doing[fqdn] = (system.usage, self.now)

    @rule(step=st.floats(min_value=0, max_value=1000, allow_nan=False))
    def tick(self, step):
        self.now += step

    @rule()
    def add_recipe(self):
        rid = len(self.paths) + 1
        self.ledger.add_recipe(rid)
        self.paths[rid] = [RecipeState.NEW]

    @precondition(lambda self: self.paths)
    @rule(data=st.data(), target_state=st.sampled_from(list(RecipeState)))
    def move(self, data, target_state):
        rid = data.draw(st.sampled_from(sorted(self.paths)))
        fqdn = data.draw(st.sampled_from([None, *SYSTEMS]))
        self.move_to(rid, target_state, fqdn)

    def move_to(self, rid, target_state, fqdn):
        before = self.ledger.recipes[rid].state
        try:
            self.ledger.move_recipe(rid, target_state, self.now, system=fqdn)
        except IllegalTransition:
            assert self.ledger.recipes[rid].state is before
        else:
            if self.ledger.recipes[rid].state is not before:
                self.paths[rid].append(self.ledger.recipes[rid].state)
                event(f"reached {self.ledger.recipes[rid].state.value}")
        self._observe()

    @precondition(lambda self: self.paths)
    @rule(data=st.data(), steps=st.integers(1, 7))
    def advance(self, data, steps):
        """A few legal moves of one recipe, so runs reach the later states too."""
        unfinished = sorted(r for r, slot in self.ledger.recipes.items() if not slot.state.is_final)
        if not unfinished:
            return
        rid = data.draw(st.sampled_from(unfinished))
        for _ in range(steps):
            state = self.ledger.recipes[rid].state
            if state.is_final:
                return
            onward = sorted(
                RECIPE_MOVES[state] - {RecipeState.CANCELLED, RecipeState.ABORTED}, key=str
            )
            if onward and data.draw(st.integers(0, 9)) < 9:
                target_state = data.draw(st.sampled_from(onward))
            else:
                target_state = data.draw(
                    st.sampled_from([RecipeState.CANCELLED, RecipeState.ABORTED])
                )
            free = [f for f, s in self.ledger.systems.items() if s.recipe is None]
            fqdn = data.draw(st.sampled_from(free)) if free else None
            self.move_to(rid, target_state, fqdn)
            self.now += data.draw(st.floats(min_value=0, max_value=100, allow_nan=False))

    @rule(fqdn=st.sampled_from(SYSTEMS), condition=st.sampled_from(list(Condition)))
    def change_condition(self, fqdn, condition):
        self.ledger.set_condition(fqdn, condition, self.now)
        self._observe()

    @rule(fqdn=st.sampled_from(SYSTEMS))
    def settle_pending(self, fqdn):
        system = self.ledger.systems[fqdn]
        if system.usage is Usage.PENDING:
            self.ledger.set_usage(fqdn, Usage.IDLE, self.now)
        self._observe()

    @invariant()
    def every_path_follows_the_table(self):
        for path in self.paths.values():
            for a, b in itertools.pairwise(path):
                assert b in RECIPE_MOVES[a], f"{a} -> {b}"

    @invariant()
    def usage_mirrors_the_recipe_that_holds_the_system(self):
        holders = {}
        for rid, slot in self.ledger.recipes.items():
            if slot.state.holds_system:
                assert slot.system is not None
                system = self.ledger.systems[slot.system]
                assert system.recipe == rid
                assert system.usage is MIRRORED_USAGE[slot.state]
                assert slot.system not in holders, "a system serves two recipes"
                holders[slot.system] = rid
            else:
                assert slot.system is None
        for fqdn, system in self.ledger.systems.items():
            if fqdn not in holders:
                assert system.recipe is None
                assert system.usage in (Usage.IDLE, Usage.PENDING)

    @invariant()
    def non_automated_free_systems_are_idle(self):
        for system in self.ledger.systems.values():
            if system.recipe is None and system.condition is not Condition.AUTOMATED:
                assert system.usage is Usage.IDLE

    @invariant()
    def history_accounts_for_all_the_time(self):
        for fqdn in SYSTEMS:
            usage, since = self.doing[fqdn]
            expected = dict(self.spent[fqdn])
            expected[usage] += self.now - since
            measured = time_in_usage(self.ledger.history.of(fqdn), 0.0, self.now, now=self.now)
            for u in Usage:
                assert measured[u] == pytest.approx(expected[u], abs=1e-6)


LedgerMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestLedger = LedgerMachine.TestCase


def test_a_recipe_cannot_take_a_system_another_recipe_holds():
    ledger = Ledger()
    ledger.add_system(System(fqdn="s1", lab="lab1"), 0)
    ledger.add_recipe(1)
    ledger.add_recipe(2)
    ledger.move_recipe(1, RecipeState.SCHEDULED, 1, system="s1")
    with pytest.raises(IllegalTransition, match="already serves recipe 1"):
        ledger.move_recipe(2, RecipeState.SCHEDULED, 2, system="s1")
    assert ledger.recipes[2].state is RecipeState.NEW


def test_a_finished_recipe_leaves_its_system_pending_or_idle_if_broken():
    ledger = Ledger()
    for fqdn in ("s1", "s2"):
        ledger.add_system(System(fqdn=fqdn, lab="lab1"), 0)
    for rid, fqdn in ((1, "s1"), (2, "s2")):
        ledger.add_recipe(rid)
        for state in (RecipeState.SCHEDULED, RecipeState.WAITING, RecipeState.INSTALLING):
            ledger.move_recipe(rid, state, 10, system=fqdn)
    ledger.set_condition("s2", Condition.BROKEN, 20)
    assert ledger.systems["s2"].usage is Usage.INSTALLING  # still held until the recipe lets go
    ledger.move_recipe(1, RecipeState.ABORTED, 30)
    ledger.move_recipe(2, RecipeState.ABORTED, 30)
    assert ledger.systems["s1"].usage is Usage.PENDING
    assert ledger.systems["s2"].usage is Usage.IDLE


def test_utilisation_of_a_pool_weighs_each_system_by_its_recorded_time():
    ledger = Ledger()
    ledger.add_system(System(fqdn="s1", lab="lab1"), 0)
    ledger.add_system(System(fqdn="s2", lab="lab1"), 50)
    ledger.add_recipe(1)
    ledger.move_recipe(1, RecipeState.SCHEDULED, 0, system="s1")
    ledger.move_recipe(1, RecipeState.WAITING, 0)
    ledger.move_recipe(1, RecipeState.INSTALLING, 0)
    ledger.move_recipe(1, RecipeState.RUNNING, 0)
    ledger.move_recipe(1, RecipeState.COMPLETED, 100)
    rows = ledger.history.rows
    # s1 busy for 100 of 100 s, s2 recorded for 50 s and never busy
    assert utilisation(rows, 0, 100, now=100) == pytest.approx(100 / 150)
    assert utilisation(ledger.history.of("s1"), 0, 100, now=100) == pytest.approx(1.0)
    assert utilisation(ledger.history.of("s1"), 0, 200, now=200) == pytest.approx(0.5)


def test_a_change_that_seems_to_go_back_in_time_happens_at_the_open_rows_start():
    ledger = Ledger()
    ledger.add_system(System(fqdn="s1", lab="lab1"), 10.0)
    ledger.set_condition("s1", Condition.BROKEN, 10.0)  # the same tick
    ledger.set_condition("s1", Condition.AUTOMATED, 9.999)  # a clock a little behind
    rows = ledger.history.of("s1")
    assert [(r.start, r.end) for r in rows] == [
        (10.0, 10.0),
        (10.0, 10.0),
        (10.0, 10.0),
        (10.0, None),
    ]
    assert rows[-1].usage is Usage.PENDING
