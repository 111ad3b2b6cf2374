"""The run-time predictor (domain/prediction.py): learning, fallbacks, EASY++ raises."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labq.domain.prediction import (
    DECLARED,
    PastRun,
    Predictor,
    raised,
    service_signature,
    swf_signature,
)

KIND = swf_signature(3, 7, 4)
SAME_USER = swf_signature(3, 9, 4)  # another executable of the same user
seconds = st.floats(min_value=0, max_value=1e6, allow_nan=False)


def run(seconds: float, signature=KIND, outcome="completed", at=0.0) -> PastRun:
    return PastRun(signature, seconds, outcome, at)


def test_without_history_the_declared_max_time_is_the_prediction() -> None:
    found = Predictor().predict(KIND, 3600)
    assert found is not None
    assert (found.seconds, found.runs, found.basis) == (3600, 0, DECLARED)
    assert Predictor().predict(KIND, None) is None


def test_the_mean_of_the_last_two_runs_of_the_finest_level() -> None:
    predictor = Predictor()
    for value in (100, 200, 300):
        predictor.learn(run(value))
    found = predictor.predict(KIND, 3600)
    assert found is not None
    assert found.seconds == 250
    assert found.runs == 3
    assert found.median == 200
    assert found.basis == "user, executable, processors"


def test_falls_back_to_a_coarser_level() -> None:
    predictor = Predictor()
    predictor.learn(run(500, SAME_USER))
    found = predictor.predict(KIND, 3600)
    assert found is not None
    assert (found.seconds, found.basis) == (500, "user")
    stranger = predictor.predict(swf_signature(4, 7, 4), 3600)
    assert stranger is not None
    assert stranger.basis == DECLARED


@pytest.mark.parametrize("outcome", ["aborted", "cancelled"])
def test_aborted_and_cancelled_runs_are_not_the_length(outcome: str) -> None:
    predictor = Predictor()
    predictor.learn(run(100))
    predictor.learn(run(5, outcome=outcome))
    found = predictor.predict(KIND, 3600)
    assert found is not None
    assert (found.seconds, found.runs) == (100, 1)


def test_service_signature_is_finest_first() -> None:
    levels = service_signature("git:suite@abc", ["/distribution/check"], "arch=x86_64", "ann", "qe")
    assert [name for name, _ in levels] == [
        "job source",
        "task list and hosts",
        "owner and task list",
        "owner",
        "group",
    ]
    first, *_ = service_signature(None, ["t"], "", "ann", None)
    assert first[0] == "task list and hosts"


@given(st.lists(seconds, min_size=1, max_size=20), st.floats(min_value=1, max_value=1e6))
def test_never_above_max_time(history: list[float], max_time: float) -> None:
    predictor = Predictor()
    for value in history:
        predictor.learn(run(value))
    found = predictor.predict(KIND, max_time)
    assert found is not None
    assert found.seconds <= max_time


@given(
    st.lists(seconds, max_size=10),
    st.floats(min_value=1, max_value=1e5),
    st.integers(min_value=3, max_value=30),
    st.lists(st.floats(min_value=1, max_value=1e4), min_size=3, max_size=3),
)
def test_converges_on_a_stable_kind(
    noise: list[float], stable: float, repeats: int, other: list[float]
) -> None:
    """Whatever came before, after two runs of the same length the prediction is that length,
    and runs of other kinds or aborted runs in between change nothing."""
    predictor = Predictor()
    for value in noise:
        predictor.learn(run(value))
    for _ in range(repeats):
        predictor.learn(run(stable))
        predictor.learn(run(other[0], SAME_USER))
        predictor.learn(run(other[1], outcome="aborted"))
    found = predictor.predict(KIND, None)
    assert found is not None
    assert found.seconds == pytest.approx(stable)


@given(
    st.floats(min_value=1, max_value=1e5),
    st.floats(min_value=0, max_value=2e5),
    st.one_of(st.none(), st.floats(min_value=1, max_value=2e5)),
    st.sampled_from([(), (60.0,), (60.0, 300.0, 3600.0)]),
)
def test_a_raise_is_never_below_the_elapsed_time(
    predicted: float, elapsed: float, max_time: float | None, steps: tuple[float, ...]
) -> None:
    value = raised(predicted, elapsed, max_time, steps)
    if value is None:  # no steps, no max_time: it could end any moment
        assert predicted <= elapsed
        assert (steps, max_time) == ((), None)
        return
    assert value >= elapsed
    if max_time is not None and elapsed <= max_time:
        assert value <= max_time
    if predicted > elapsed and (max_time is None or predicted <= max_time):
        assert value == predicted  # a prediction not passed stands


def test_raises_step_by_step_then_to_max_time() -> None:
    steps = (60.0, 300.0)
    assert raised(100, 100, 10_000, steps) == 160
    assert raised(100, 170, 10_000, steps) == 460  # from the first prediction: 100, 160, 460
    assert raised(100, 500, 10_000, steps) == 760  # the last step repeats
    assert raised(9_900, 9_990, 10_000, (300.0,)) == 10_000
    assert raised(100, 150, 10_000, ()) == 10_000  # EASY++ straight to the user's limit


def test_an_swf_trace_without_users_has_no_kinds() -> None:
    assert swf_signature(-1, -1, 16) == ()
    assert [name for name, _ in swf_signature(5, -1, 16)] == ["user, processors", "user"]
    found = Predictor().predict(swf_signature(-1, -1, 16), 600)
    assert found is not None
    assert found.basis == DECLARED
