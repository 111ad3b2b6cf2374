import pytest
from hypothesis import given
from hypothesis import strategies as st

from labq.domain.priority import Priority, effective_priority

priorities = st.sampled_from(list(Priority))


def test_levels_are_ordered_as_beaker_orders_them():
    assert Priority.LOW < Priority.MEDIUM < Priority.NORMAL < Priority.HIGH < Priority.URGENT


@pytest.mark.parametrize("text", ["Normal", "normal", " NORMAL "])
def test_names_are_read_case_insensitively(text):
    assert Priority.parse(text) is Priority.NORMAL


@pytest.mark.parametrize("text", ["superhigh", "", 3, None])
def test_unknown_priorities_are_refused_with_the_choices(text):
    with pytest.raises(ValueError, match="expected one of low, medium, normal, high, urgent"):
        Priority.parse(text)


@given(priorities, st.integers(min_value=0, max_value=10), priorities)
def test_raising_never_passes_the_ceiling_and_never_lowers(start, levels, ceiling):
    raised = start.raised(levels, ceiling)
    assert raised >= start
    assert raised <= max(start, ceiling)
    if start < ceiling:
        assert int(raised) == min(int(start) + levels, int(ceiling))


def test_effective_priority_is_the_lower_of_nominal_and_maximum():
    assert effective_priority(Priority.URGENT, Priority.MEDIUM) is Priority.MEDIUM
    assert effective_priority(Priority.LOW, Priority.URGENT) is Priority.LOW
    assert effective_priority(Priority.HIGH, None) is None
