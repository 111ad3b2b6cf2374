"""Job dependencies, pure: reading ``depends`` entries, judging them, finding cycles."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labq.domain.dependencies import (
    DEFAULT_ON,
    Dependency,
    DependencyError,
    Edge,
    find_cycle,
    parse,
    states_text,
    verdict,
)
from labq.domain.job import JobSpec
from labq.domain.states import RecipeState
from labq.errors import InputError
from labq.formats.native import parse_native

COMPLETED, CANCELLED, ABORTED = RecipeState.COMPLETED, RecipeState.CANCELLED, RecipeState.ABORTED


def test_the_three_forms_and_their_native_form() -> None:
    assert parse(12) == Dependency(12)
    assert parse("nightly") == Dependency("nightly")
    assert parse({"job": 12}) == Dependency(12, DEFAULT_ON)
    both = parse({"job": 12, "on": ["completed", "aborted", "completed"]})
    assert both == Dependency(12, (COMPLETED, ABORTED))
    assert [d.to_native() for d in (parse(12), parse({"job": 3}), both)] == [
        12,
        3,
        {"job": 12, "on": ["completed", "aborted"]},
    ]


@pytest.mark.parametrize(
    ("value", "path", "problem"),
    [
        (True, "", "not True"),
        (0, "", "job ids start at 1"),
        (" ", "", "must not be empty"),
        (1.5, "", "not 1.5"),
        ({"on": ["completed"]}, "job", "missing required key 'job'"),
        ({"job": 3, "when": "now"}, "when", "unknown key 'when'"),
        ({"job": 3, "on": []}, "on", "non-empty list"),
        ({"job": 3, "on": ["completed", "failed"]}, "on[1]", "'failed' is not an end state"),
        ({"job": -2}, "job", "job ids start at 1"),
    ],
)
def test_bad_entries_say_where_and_what(value: object, path: str, problem: str) -> None:
    with pytest.raises(DependencyError) as caught:
        parse(value)
    assert caught.value.path == path
    assert problem in caught.value.problem


def test_job_documents_read_and_write_dependencies() -> None:
    job = parse_native(
        "depends: [7, nightly, {job: 9, on: [aborted, cancelled]}]\n"
        "reason: nightly rate-limit:2:nightly\n"
        "recipe_sets: [{recipes: [{}]}]\n",  # YAML reads a bare `on` as true: still `on`
        source="job.yaml",
    )
    assert job.canonical()["depends"] == [7, "nightly", {"job": 9, "on": ["aborted", "cancelled"]}]
    assert job.reason == "nightly rate-limit:2:nightly"
    assert JobSpec.model_validate(json.loads(json.dumps(job.canonical()))) == job
    with pytest.raises(InputError) as caught:
        parse_native(
            "recipe_sets: [{recipes: [{}]}]\ndepends: [{job: 2, on: [done]}]\n", source="j"
        )
    assert str(caught.value) == (
        "j:2: depends[0].on[0]: 'done' is not an end state "
        "(expected one of completed, cancelled, aborted)"
    )
    with pytest.raises(InputError, match=r"j:1: reason: 'rate-limit:x:n' is not a rate limit"):
        parse_native("reason: rate-limit:x:n\nrecipe_sets: [{recipes: [{}]}]\n", source="j")


def test_states_read_as_people_say_them() -> None:
    assert states_text([COMPLETED]) == "completed"
    assert states_text([COMPLETED, ABORTED]) == "completed or aborted"
    assert states_text([COMPLETED, CANCELLED, ABORTED]) == "completed, cancelled or aborted"


def test_verdicts() -> None:
    edges = [Edge(3, (COMPLETED,)), Edge(5, (COMPLETED, ABORTED))]
    assert verdict([], {}).satisfied
    assert verdict(edges, {}).waiting == (
        "waits for job 3 to end (needs completed), job 5 to end (needs completed or aborted)"
    )
    assert verdict(edges, {5: ABORTED}).waiting == "waits for job 3 to end (needs completed)"
    assert verdict(edges, {3: COMPLETED, 5: ABORTED}).satisfied
    failed = verdict(edges, {3: CANCELLED})  # failing wins over waiting for the other
    assert failed.failed == "job 3 ended cancelled; this job needed completed"
    assert failed.waiting is None
    assert not failed.satisfied


def test_cycles_are_found_with_their_path() -> None:
    assert find_cycle({7: [7]}, 7) == [7, 7]
    assert find_cycle({7: [5], 5: [3], 3: [7]}, 7) == [7, 5, 3, 7]
    assert find_cycle({7: [5, 3], 5: [3], 3: [1]}, 7) is None
    assert find_cycle({7: [5], 5: [5]}, 7) is None  # a cycle elsewhere is not this job's


@st.composite
def dags(draw: st.DrawFn) -> dict[int, list[int]]:
    """Graphs whose edges all point to smaller ids: no cycle anywhere."""
    size = draw(st.integers(1, 12))
    return {
        job: draw(st.lists(st.integers(0, job - 1), max_size=4)) if job else []
        for job in range(size)
    }


def reachable(graph: dict[int, list[int]], start: int) -> set[int]:
    seen, todo = {start}, [start]
    while todo:
        for target in graph.get(todo.pop(), []):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


@given(dags(), st.data())
def test_a_found_cycle_is_a_real_path_and_only_back_edges_make_one(
    graph: dict[int, list[int]], data: st.DataObject
) -> None:
    for start in graph:
        assert find_cycle(graph, start) is None
    start = data.draw(st.sampled_from(sorted(graph)))
    source = data.draw(st.sampled_from(sorted(graph)))
    closed = {**graph, source: [*graph[source], start]}  # an edge back to start
    path = find_cycle(closed, start)
    assert (path is not None) == (source in reachable(graph, start))
    if path is not None:
        assert path[0] == path[-1] == start
        for a, b in itertools.pairwise(path):
            assert b in closed[a]
