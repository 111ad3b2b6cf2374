"""The repository keeps the lifecycle rules exactly as the in-memory Ledger does."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labq.domain.lifecycle import Ledger
from labq.domain.model import System
from labq.domain.states import RECIPE_MOVES, Condition, RecipeState, Usage
from labq.errors import LabqError
from labq.store import Repository, epoch, from_epoch

from .conftest import Database, at, job_spec, recipe_ids, seed

FQDNS = ("s1.lab", "s2.lab", "s3.lab")
START = epoch(at(0))


def ledger_like_seed() -> Ledger:
    """The systems of ``seed``, in a Ledger."""
    ledger = Ledger()
    for fqdn in FQDNS:
        condition = Condition.MANUAL if fqdn == "s3.lab" else Condition.AUTOMATED
        ledger.add_system(System(fqdn, "lab1", condition=condition), START)
    return ledger


Step = Callable[[], object]


def outcome(action: Step) -> str:
    """'ok' or 'refused': the two stores may word a refusal differently, not decide it."""
    try:
        action()
    except LabqError:
        return "refused"
    return "ok"


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_random_moves_leave_both_stores_alike(db: Database, data: st.DataObject) -> None:
    with db.engine.connect() as conn:
        conn.begin()
        repo = Repository(conn)
        seed(repo)
        job_id = repo.queue.submit_job(
            job_spec(2, 2), owner="bob", now=at(0), source_format="native"
        )
        recipes = [r for s in recipe_ids(repo, job_id) for r in s]
        ledger = ledger_like_seed()
        for recipe in recipes:
            ledger.add_recipe(recipe)
        for step in range(data.draw(st.integers(1, 30), label="steps")):
            seconds = START + 10 + step
            both = _draw_step(data, ledger, repo, seconds)
            assert outcome(both[0]) == outcome(both[1])
        _assert_alike(ledger, repo, recipes)
        conn.rollback()


def _draw_step(
    data: st.DataObject, ledger: Ledger, repo: Repository, seconds: float
) -> tuple[Step, Step]:
    now = from_epoch(seconds)
    kind = data.draw(st.sampled_from(["move", "move", "move", "condition", "usage"]))
    fqdn = data.draw(st.sampled_from(FQDNS))
    if kind == "condition":
        cond = data.draw(st.sampled_from(Condition))
        return (
            lambda: ledger.set_condition(fqdn, cond, seconds),
            lambda: repo.systems.set_condition(fqdn, cond, now=now, actor="hypothesis"),
        )
    if kind == "usage":
        usage = data.draw(st.sampled_from([Usage.IDLE, Usage.PENDING]))
        return (
            lambda: ledger.set_usage(fqdn, usage, seconds),
            lambda: repo.systems.set_usage(fqdn, usage, now=now),
        )
    recipe = data.draw(st.sampled_from(sorted(ledger.recipes)))
    legal = sorted(RECIPE_MOVES[ledger.recipes[recipe].state], key=lambda s: s.value)
    pick = st.sampled_from(legal) if legal else st.sampled_from(RecipeState)
    target = data.draw(st.one_of(pick, st.sampled_from(RecipeState)) if legal else pick)
    system = data.draw(st.sampled_from([*FQDNS, None]))
    return (
        lambda: ledger.move_recipe(recipe, target, seconds, system=system),
        lambda: repo.moves.move_recipe(recipe, target, now=now, system=system),
    )


def _assert_alike(ledger: Ledger, repo: Repository, recipes: list[int]) -> None:
    assert [repo.moves.recipe_state(r) for r in recipes] == [
        ledger.recipes[r].state for r in recipes
    ]
    for fqdn in FQDNS:
        stored, kept = repo.systems.get_system(fqdn), ledger.systems[fqdn]
        assert (stored.usage, stored.condition, stored.recipe) == (
            kept.usage,
            kept.condition,
            kept.recipe,
        )
        assert repo.systems.usage_history(fqdn) == ledger.history.of(fqdn)
