import pytest

from labq.domain.states import (
    RECIPE_MOVES,
    USAGE_MOVES,
    RecipeState,
    Result,
    Usage,
    check_recipe_move,
    check_usage_move,
    derived_state,
    recipe_predecessors,
    worst_result,
)
from labq.errors import IllegalTransition

R = RecipeState


def test_processed_does_not_exist_and_new_states_do():
    names = {s.value for s in RecipeState}
    assert "processed" not in names
    assert {"assigned", "waiting", "installing"} <= names


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (R.NEW, R.QUEUED),
        (R.NEW, R.ASSIGNED),
        (R.NEW, R.SCHEDULED),
        (R.QUEUED, R.ASSIGNED),
        (R.QUEUED, R.SCHEDULED),
        (R.ASSIGNED, R.SCHEDULED),
        (R.SCHEDULED, R.WAITING),
        (R.WAITING, R.INSTALLING),
        (R.INSTALLING, R.RUNNING),
        (R.RUNNING, R.COMPLETED),
    ],
)
def test_design_moves_are_allowed(start, end):
    assert check_recipe_move(start, end) is True


@pytest.mark.parametrize("start", [s for s in RecipeState if not s.is_final])
@pytest.mark.parametrize("end", [R.CANCELLED, R.ABORTED])
def test_every_unfinished_state_can_be_cancelled_or_aborted(start, end):
    assert check_recipe_move(start, end)


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (R.NEW, R.RUNNING),
        (R.QUEUED, R.WAITING),
        (R.SCHEDULED, R.RUNNING),
        (R.WAITING, R.SCHEDULED),
        (R.RUNNING, R.QUEUED),
        (R.COMPLETED, R.ABORTED),
        (R.ABORTED, R.QUEUED),
        (R.CANCELLED, R.COMPLETED),
    ],
)
def test_forbidden_moves_raise(start, end):
    with pytest.raises(IllegalTransition, match=f"from {start.value} to {end.value}"):
        check_recipe_move(start, end)


@pytest.mark.parametrize("state", list(RecipeState))
def test_a_repeated_move_is_a_no_op(state):
    assert check_recipe_move(state, state) is False


def test_final_states_have_no_way_out():
    for state in (R.COMPLETED, R.CANCELLED, R.ABORTED):
        assert RECIPE_MOVES[state] == frozenset()


def test_usage_table_covers_every_usage_and_a_broken_system_can_always_drop_to_idle():
    assert set(USAGE_MOVES) == set(Usage)
    for usage in Usage:
        if usage is not Usage.IDLE:
            assert check_usage_move(usage, Usage.IDLE)
    with pytest.raises(IllegalTransition):
        check_usage_move(Usage.IDLE, Usage.RUNNING)


def test_predecessors_are_the_inverse_of_the_table():
    for target in RecipeState:
        for source in recipe_predecessors(target):
            assert target in RECIPE_MOVES[source]
    assert recipe_predecessors(R.RUNNING) == {R.INSTALLING}


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ([], R.NEW),
        ([R.RUNNING, R.SCHEDULED], R.SCHEDULED),
        ([R.RUNNING, R.COMPLETED], R.RUNNING),
        ([R.COMPLETED, R.COMPLETED], R.COMPLETED),
        ([R.COMPLETED, R.ABORTED, R.CANCELLED], R.ABORTED),
        ([R.COMPLETED, R.CANCELLED], R.CANCELLED),
        ([R.ASSIGNED, R.SCHEDULED, R.QUEUED], R.QUEUED),
    ],
)
def test_set_and_job_state_is_derived_from_recipes(states, expected):
    assert derived_state(states) is expected


def test_the_worst_result_wins():
    assert worst_result([Result.PASS, None, Result.WARN]) is Result.WARN
    assert worst_result([Result.FAIL, Result.PASS]) is Result.FAIL
    assert worst_result([None]) is None
